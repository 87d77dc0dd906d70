"""A gateway claims a heartbeat unit when a slot starts it, never more than it can run,
so the units it cannot get to are left to the other gateways; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support.databases import SharedDb
from tests.support.waits import until
from vikingbot.agent.types import TurnResult
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.delivery.service import Outgoing
from vikingbot.gateway import compose
from vikingbot.gateway.compose import Home, build_home
from vikingbot.heartbeat.service import HeartbeatService
from vikingbot.session.types import Message, SessionKey
from vikingbot.store.leases import Leases

TEMPLATE = (
    "# Heartbeat Tasks\n\n## Active Tasks\n\n<!-- Add your periodic tasks below this line -->\n\n"
    "- Report on {name}\n\n## Completed\n\n<!-- Move completed tasks here or delete them -->\n"
)


@dataclass
class Agent:
    """Answers each heartbeat turn with ``Done by <name>``, once ``gate`` is open."""

    name: str
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    turns: int = 0

    async def run_turn(self, prompt: str, session_key: Any, metadata: Any = None, **_: Any) -> Any:
        self.turns += 1
        await self.gate.wait()
        return TurnResult(text=f"Done by {self.name}.", model_calls=1)


def _home(home: Path, names: list[str]) -> None:
    from vikingbot.session.store import SessionStore
    from vikingbot.workspace.manager import checked_name

    sessions = SessionStore(home / "sessions")
    for name in names:
        key = SessionKey("telegram", "default", name)
        sessions.get_or_create(key)
        sessions.append(key, Message(role="user", content="hi", timestamp=datetime.now(UTC)))
        folder = home / "workspace" / checked_name(key, "per-session")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "HEARTBEAT.md").write_text(TEMPLATE.format(name=name))


def _gateway(
    home: Path, db: SharedDb, name: str, agent: Agent, sent: list[str]
) -> tuple[Home, HeartbeatService]:
    url = db.config_url
    paths = Paths(home=home, config_file=home / "config.json", data_dir=home, database_url=url)
    config = Config.model_validate(
        {
            "bot": {
                "owner": "telegram:42",
                "sandbox": {"mode": "per-session"},
                "heartbeat": {"timezone": "UTC", "max_concurrency": 1},
                "channels": {"telegram": {"enabled": True, "token": "t", "allow_from": ["42"]}},
            }
        }
    )
    from vikingbot.clock import SystemClock

    rt = build_home(config, paths, clock=SystemClock(), environ={})

    async def record(item: Outgoing) -> bool:
        sent.append(item.message.text)
        return True

    rt.delivery.connect(record)
    return rt, compose.heartbeat(rt, agent=agent, owner=name)  # type: ignore[arg-type]


async def test_a_gateway_busy_with_its_one_slot_leaves_the_other_units_to_another(
    shared_db: SharedDb, tmp_path: Path
) -> None:
    names = ["ann", "bob", "cat", "dan"]
    _home(tmp_path, names)
    shared_db.open().close()  # the schema, migrated
    sent: list[str] = []
    slow, quick = Agent("A"), Agent("B")
    quick.gate.set()
    rt_a, hb_a = _gateway(tmp_path, shared_db, "gw-a", slow, sent)
    rt_b, hb_b = _gateway(tmp_path, shared_db, "gw-b", quick, sent)
    leases = Leases(rt_b.store, rt_b.clock)
    try:
        first = asyncio.create_task(hb_a.run_cycle())
        await until(lambda: slow.turns == 1, "A's first turn")
        assert [h.holder for h in leases.holders("hb:")] == ["gw-a"]  # nothing claimed ahead
        report = await hb_b.run_cycle()  # B runs every unit A is not running
        busy = [r for r in report.rows if r.reason == "busy"]
        assert quick.turns == len(names) - 1 and len(busy) == 1
        slow.gate.set()
        await asyncio.wait_for(first, 30)
        assert slow.turns == 1  # A's next units had been run by B: not again
        assert sorted(sent) == ["Done by A."] + ["Done by B."] * (len(names) - 1)
        assert leases.holders("hb:") == []
    finally:
        slow.gate.set()
        for rt, hb in ((rt_a, hb_a), (rt_b, hb_b)):
            hb.stop()
            await hb.drain(5)
            await rt.aclose()
