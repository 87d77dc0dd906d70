"""Shared set-up for the heartbeat benches: a home with many sessions and workspaces.

Session files are written directly in the store's format (no fsync per file) so
that building 10,000 sessions takes seconds, not minutes; the heartbeat reads
them through the real ``SessionStore``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from vikingbot.agent.types import TurnResult
from vikingbot.clock import FakeClock
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.gateway import compose
from vikingbot.session import codec
from vikingbot.session.types import Message, SessionKey, SessionMeta

TEMPLATE = (
    "# Heartbeat Tasks\n\n## Active Tasks\n\n<!-- Add your periodic tasks below this line -->\n\n"
    "## Completed\n\n<!-- Move completed tasks here or delete them -->\n"
)


def with_tasks(*lines: str) -> str:
    return TEMPLATE.replace(
        "below this line -->\n", "below this line -->\n" + "".join(f"{x}\n" for x in lines)
    )


def make_runtime(home: Path, clock: FakeClock, config: dict[str, Any]) -> compose.Home:
    paths = Paths(
        home=home,
        config_file=home / "config.json",
        data_dir=home / "data",
        database_url=f"sqlite:///{home / 'data' / 'state.db'}",
    )
    return compose.build_home(Config.model_validate(config), paths, clock=clock, environ={})


def write_session(
    sessions_dir: Path, key: SessionKey, last_user_at: datetime | None, *, skip: bool = False
) -> None:
    now = last_user_at or datetime.fromisoformat("2026-01-01T00:00:00+00:00")
    meta = SessionMeta(key, created_at=now, updated_at=now, last_user_at=last_user_at)
    if skip:
        meta.metadata["skip_heartbeat"] = True
    lines = [codec.dumps_line(codec.meta_to_obj(meta))]
    if last_user_at is not None:
        msg = Message(role="user", content="hi", timestamp=last_user_at)
        lines.append(codec.dumps_line(codec.message_to_obj(msg)))
    sessions_dir.mkdir(parents=True, exist_ok=True)
    (sessions_dir / codec.key_to_filename(key)).write_bytes(b"".join(lines))


def fresh(clock: FakeClock) -> datetime:
    return clock.now() - timedelta(minutes=5)


BENCH_CONFIG: dict[str, Any] = {
    "bot": {"sandbox": {"mode": "per-session"}, "heartbeat": {"timezone": "UTC"}}
}


def build_home(
    home: Path, n: int, *, task_every: int, task: str, now: datetime
) -> tuple[list[SessionKey], list[Path]]:
    """``n`` per-session workspaces whose sessions were active 5 minutes before ``now``;
    every ``task_every``-th HEARTBEAT.md holds ``task``, the others the template.

    Writes ``<home>/config.json`` too, so the CLI and a gateway see the same home.
    """
    import json

    from vikingbot.workspace.manager import checked_name

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(BENCH_CONFIG))
    sessions_dir = home / "data" / "sessions"
    root = home / "data" / "workspace"
    keys, files = [], []
    for i in range(n):
        key = SessionKey("telegram", "default", f"user{i}")
        write_session(sessions_dir, key, now - timedelta(minutes=5))
        ws = root / checked_name(key, "per-session")
        ws.mkdir(parents=True, exist_ok=True)
        hb = ws / "HEARTBEAT.md"
        hb.write_text(with_tasks(task) if i % task_every == 0 else TEMPLATE)
        keys.append(key)
        files.append(hb)
    return keys, files


class WritingAgent:
    """Answers at once, and writes the turn to its session as the built-in loop does."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self.calls = 0

    async def run_turn(self, prompt: str, key: Any, metadata: Any = None, **_: Any) -> TurnResult:
        self.calls += 1
        now = self.rt.clock.now()
        msgs = [
            Message("user", prompt, now, metadata={"heartbeat": True}),
            Message("assistant", "HEARTBEAT_OK", now, metadata={"heartbeat": True}),
        ]
        await asyncio.to_thread(self.rt.sessions.append, key, *msgs)
        return TurnResult(text="HEARTBEAT_OK", model_calls=1)
