"""A whole heartbeat in one process: runtime, fake model server, recording bus.

``build_harness(tmp_path, fake)`` yields a :class:`Harness`: a vikingbot home
under ``tmp_path`` whose config points the OpenAI provider at ``fake``, a
``FakeClock`` at 2026-03-10 12:00 UTC, and an outbound handler that records
what would be sent (``Harness.sent``). Tests of the heartbeat, the gateway's
inbound path and dashboard prompts use it; the pytest fixtures are in
``tests/heartbeat/conftest.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from vikingbot.clock import FakeClock
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.delivery.service import Outgoing
from vikingbot.delivery.types import OutboundMessage
from vikingbot.gateway import compose
from vikingbot.gateway.compose import Home, build_home
from vikingbot.heartbeat.service import HeartbeatService
from vikingbot.metrics import Metrics
from vikingbot.session.types import Message, SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI

TEMPLATE = (
    "# Heartbeat Tasks\n\n## Active Tasks\n\n<!-- Add your periodic tasks below this line -->\n\n"
    "## Completed\n\n<!-- Move completed tasks here or delete them -->\n"
)
OWNER = SessionKey("telegram", "default", "42")


def with_tasks(*lines: str) -> str:
    return TEMPLATE.replace(
        "below this line -->\n", "below this line -->\n" + "".join(f"{x}\n" for x in lines)
    )


@dataclass
class Harness:
    rt: Home
    fake: FakeOpenAI
    clock: FakeClock
    sent: list[OutboundMessage] = field(default_factory=list)
    metrics: Metrics = field(default_factory=Metrics)
    svc: HeartbeatService | None = None

    @property
    def hb(self) -> HeartbeatService:
        if self.svc is None:
            self.svc = compose.heartbeat(self.rt, metrics=self.metrics)
        return self.svc

    def workspace(self, name: str = "shared") -> Path:
        path = self.rt.paths.workspace_root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write(self, text: str, name: str = "shared") -> Path:
        path = self.workspace(name) / "HEARTBEAT.md"
        path.write_text(text, encoding="utf-8")
        return path

    def user_session(
        self, key: SessionKey = OWNER, *, ago: timedelta = timedelta(minutes=5), **meta: Any
    ) -> None:
        sessions = self.rt.sessions
        sessions.get_or_create(key, skip_heartbeat=bool(meta.get("skip_heartbeat")))
        at = self.clock.now() - ago
        saved = self.clock.now()
        self.clock.set(at)
        sessions.append(key, Message(role="user", content="hello", timestamp=at))
        self.clock.set(saved)

    async def cycle(self, trigger: str = "scheduled", **kw: Any) -> Any:
        return await self.hb.run_cycle(trigger, **kw)  # type: ignore[arg-type]

    def model_calls(self) -> int:
        return len(self.fake.requests)

    def texts(self) -> list[str]:
        return [m.text for m in self.sent]


def make_config(base_url: str, **heartbeat: Any) -> Config:
    return Config.model_validate(
        {
            "bot": {
                "owner": "telegram:42",
                "agents": {"provider": "openai", "model": "fake-model"},
                "providers": {
                    "openai": {"api_base": base_url, "api_key": "sk-test", "max_retries": 0}
                },
                "channels": {"telegram": {"enabled": True, "token": "t", "allow_from": ["42"]}},
                "heartbeat": {"timezone": "UTC", **heartbeat},
            }
        }
    )


async def build_harness(
    tmp_path: Path,
    fake: FakeOpenAI,
    config: Config | None = None,
    *,
    clock: FakeClock | None = None,
    **heartbeat: Any,
) -> AsyncIterator[Harness]:
    """A heartbeat on a home under ``tmp_path``: ``config`` as given, else
    :func:`make_config` with the ``heartbeat`` settings; ``clock`` as given, else a
    :class:`FakeClock` at 2026-03-10 12:00 UTC."""
    clock = clock or FakeClock(datetime(2026, 3, 10, 12, 0, tzinfo=UTC))
    if config is None:
        config = make_config(fake.base_url, **heartbeat)
    home = tmp_path / "home"
    paths = Paths(
        home=home,
        config_file=home / "config.json",
        data_dir=home / "data",
        database_url=f"sqlite:///{home / 'data' / 'state.db'}",
    )
    rt = build_home(config, paths, clock=clock, environ={})
    h = Harness(rt=rt, fake=fake, clock=clock)

    async def record(item: Outgoing) -> bool:
        # what the channel manager keeps of a sent message: its outbox row
        msg = item.message
        if msg.dedupe_key:
            rt.delivery.outbox.claim(msg, msg.dedupe_key)
            rt.delivery.outbox.mark_sent(msg.dedupe_key)
        h.sent.append(msg)
        return True

    rt.delivery.connect(record)
    try:
        yield h
    finally:
        if h.svc is not None:
            h.svc.stop()
            await h.svc.drain(5)
        await rt.aclose()
