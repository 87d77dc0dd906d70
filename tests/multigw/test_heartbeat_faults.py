"""Issue 14's faults, each with two heartbeats ("gateways") on one PostgreSQL schema
and one home: the database connection dropped for a gateway in the middle of a turn
(its lease then runs out while the turn still runs, and the late finisher must not
deliver or record over the newer claimant's result), and clocks skewed by seconds.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.pg_proxy import PgProxy
from vikingbot.agent.types import TurnResult
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.delivery.service import Outgoing
from vikingbot.gateway import compose
from vikingbot.gateway.compose import Home, build_home
from vikingbot.heartbeat.service import HeartbeatService
from vikingbot.session.types import Message, SessionKey
from vikingbot.store import StateStore

TEMPLATE = (
    "# Heartbeat Tasks\n\n## Active Tasks\n\n<!-- Add your periodic tasks below this line -->\n\n"
    "{tasks}\n## Completed\n\n<!-- Move completed tasks here or delete them -->\n"
)


@dataclass
class Agent:
    """Answers each heartbeat turn with ``Done by <name>``, after ``gate`` opens."""

    name: str
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    turns: list[str] = field(default_factory=list)

    async def run_turn(self, prompt: str, session_key: Any, metadata: Any = None, **_: Any) -> Any:
        self.turns.append(prompt)
        await self.gate.wait()
        return TurnResult(text=f"Done by {self.name}.", model_calls=1)


class SkewedClock:
    def __init__(self, skew_s: float) -> None:
        self.skew = timedelta(seconds=skew_s)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.skew


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    import psycopg

    name = f"test_{uuid.uuid4().hex[:16]}"
    StateStore.open(pg_url, schema=name).close()
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _config(lease_s: float) -> Config:
    return Config.model_validate(
        {
            "bot": {
                "owner": "telegram:42",
                "sandbox": {"mode": "per-session"},
                "heartbeat": {"timezone": "UTC", "mode": "per-task", "task_timeout_s": 120},
                "gateway": {"lease_s": lease_s},
                "channels": {"telegram": {"enabled": True, "token": "t", "allow_from": ["42"]}},
            }
        }
    )


def _home(home: Path, names: list[str]) -> None:
    """Per-session workspaces ``names``, each with one task and a fresh session."""
    from vikingbot.session.store import SessionStore
    from vikingbot.workspace.manager import checked_name

    sessions = SessionStore(home / "sessions")
    for name in names:
        key = SessionKey("telegram", "default", name)
        sessions.get_or_create(key)
        sessions.append(key, Message(role="user", content="hi", timestamp=datetime.now(UTC)))
        folder = home / "workspace" / checked_name(key, "per-session")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "HEARTBEAT.md").write_text(TEMPLATE.format(tasks=f"- Report on {name}\n"))


def _gateway(
    home: Path, url: str, agent: Agent, sent: list[str], clock: Any, lease_s: float
) -> tuple[Home, HeartbeatService]:
    paths = Paths(home=home, config_file=home / "config.json", data_dir=home, database_url=url)
    rt = build_home(_config(lease_s), paths, clock=clock, environ={})

    async def record(item: Outgoing) -> bool:
        sent.append(item.message.text)
        return True

    rt.delivery.connect(record)
    return rt, compose.heartbeat(rt, agent=agent)  # type: ignore[arg-type]


def _runs(store: StateStore) -> list[tuple[str, str | None]]:
    from sqlalchemy import select

    from vikingbot.store.tables import heartbeat_runs

    with store.engine.connect() as conn:
        rows = conn.execute(
            select(heartbeat_runs.c.workspace, heartbeat_runs.c.outcome).where(
                heartbeat_runs.c.decision == "run"
            )
        ).all()
    return [(r.workspace, r.outcome) for r in rows]


async def _until(check: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_a_gateway_cut_off_mid_turn_loses_the_unit_and_its_late_result_is_dropped(
    pg_url: str, schema: str, tmp_path: Path
) -> None:
    from vikingbot.clock import SystemClock
    from vikingbot.store.leases import Leases

    _home(tmp_path, ["alice"])
    direct = pg_url + f"?options=-csearch_path%3D{schema}"
    with PgProxy() as proxy:
        sent_a: list[str] = []
        sent_b: list[str] = []
        slow, fast = Agent("A"), Agent("B")
        fast.gate.set()
        url_a = proxy.url(pg_url) + f"?options=-csearch_path%3D{schema}"
        rt_a, hb_a = _gateway(tmp_path, url_a, slow, sent_a, SystemClock(), lease_s=1.5)
        rt_b, hb_b = _gateway(tmp_path, direct, fast, sent_b, SystemClock(), lease_s=1.5)
        leases = Leases(rt_b.store, SystemClock())
        try:
            first = asyncio.create_task(hb_a.run_cycle())
            await _until(lambda: slow.turns, "A's turn to start")
            held = leases.holders("hb:")
            assert [h.holder for h in held] and len(held) == 1
            proxy.cut()  # A can no longer renew: its lease runs out while the turn runs
            await _until(lambda: not leases.holders("hb:"), "A's lease to run out")
            await hb_b.run_cycle()  # B takes the unit over and finishes it
            assert sent_b == ["Done by B."] and len(fast.turns) == 1
            proxy.restore()
            slow.gate.set()  # A's turn ends now, late
            await asyncio.wait_for(first, 30)
            assert sent_a == []  # the late finisher delivered nothing...
            assert [o for _, o in _runs(rt_b.store)] == ["delivered"]  # ...nor recorded
            text = next((tmp_path / "workspace").glob("*/HEARTBEAT.md")).read_text()
            assert text.count("Report on alice") == 1 and "- [x] Report on alice" in text
        finally:
            slow.gate.set()
            for hb in (hb_a, hb_b):
                hb.stop()
                await hb.drain(5)
            await rt_a.aclose()
            await rt_b.aclose()


async def test_gateways_with_clocks_seconds_apart_run_each_unit_once(
    pg_url: str, schema: str, tmp_path: Path
) -> None:
    names = [f"user{n}" for n in range(12)]
    _home(tmp_path, names)
    url = pg_url + f"?options=-csearch_path%3D{schema}"
    agents = [Agent(f"gw{n}") for n in range(3)]
    sent: list[str] = []
    fleet = [
        _gateway(tmp_path, url, agent, sent, SkewedClock(skew), lease_s=15)
        for agent, skew in zip(agents, (-7.0, 0.0, 6.0), strict=True)
    ]
    try:
        for agent in agents:
            agent.gate.set()
        await asyncio.gather(*(hb.run_cycle() for _, hb in fleet))
        await asyncio.gather(*(hb.run_cycle() for _, hb in fleet))  # a second round: nothing
        runs = _runs(fleet[0][0].store)
        assert sorted(w for w, _ in runs) == sorted({w for w, _ in runs})  # once each
        assert len(runs) == len(names)
        assert sum(len(a.turns) for a in agents) == len(names)
        assert len(sent) == len(names)
    finally:
        for rt, hb in fleet:
            hb.stop()
            await hb.drain(5)
            await rt.aclose()
