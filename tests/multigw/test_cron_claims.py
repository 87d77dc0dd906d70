"""Cron across gateways: each due slot of a job fires once, whichever gateway ticks first."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import SharedDb
from tests.support.scripted_agent import START, ScriptedAgent, Sent
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.cron.service import CronService
from vikingbot.delivery.service import DeliveryService
from vikingbot.session.store import SessionStore
from vikingbot.store import StateStore
from vikingbot.workspace.manager import WorkspaceManager

CONFIG = Config.model_validate(
    {
        "bot": {
            "owner": "telegram:42",
            "heartbeat": {"taskTimeoutS": 5},
            "channels": {"telegram": {"enabled": True, "allowFrom": ["7"]}},
        }
    }
)


@pytest.fixture
def stores(shared_db: SharedDb) -> Iterator[list[StateStore]]:
    opened = [shared_db.open() for _ in range(3)]
    yield opened
    for store in opened:
        store.close()


def _gateway(
    name: str, store: StateStore, clock: FakeClock, agent: ScriptedAgent, sent: Sent, home: Path
) -> CronService:
    sessions = SessionStore(home / "sessions", clock)  # one home shared by every gateway
    delivery = DeliveryService(CONFIG, store=store, sessions=sessions, clock=clock, sink=sent)
    return CronService(
        CONFIG,
        store=store,
        agent=agent,
        delivery=delivery,
        sessions=sessions,
        workspaces=WorkspaceManager(home / "workspace"),
        clock=clock,
        owner=name,
    )


async def test_every_slot_fires_once_across_three_gateways(
    stores: list[StateStore], tmp_path: Path
) -> None:
    clock, agent, sent = FakeClock(START), ScriptedAgent(), Sent()
    services = [
        _gateway(f"gw-{i}", store, clock, agent, sent, tmp_path) for i, store in enumerate(stores)
    ]
    services[0].jobs.add("mail", "every", "30m", "Check my mail", target="telegram:7")
    await asyncio.gather(*(s.tick() for s in services))  # schedules the first slot
    assert agent.turns == []
    for slot in range(4):
        clock.advance(minutes=31)
        runs = await asyncio.gather(*(s.tick() for s in services))
        fired = [run for per_gateway in runs for run in per_gateway]
        assert len(fired) == 1, f"slot {slot}: {fired}"
    assert len(agent.turns) == 4
    assert len(sent.messages) == 4  # each reply delivered once


async def test_a_new_gateway_does_not_call_a_run_in_progress_elsewhere_interrupted(
    stores: list[StateStore], tmp_path: Path
) -> None:
    clock, sent = FakeClock(START), Sent()
    slow = ScriptedAgent(hang=True)
    first = _gateway("gw-0", stores[0], clock, slow, sent, tmp_path)
    first.jobs.add("mail", "every", "30m", "Check my mail", target="telegram:7")
    await first.tick()
    clock.advance(minutes=31)
    started = await first._start_due()  # the run hangs on gw-0
    assert len(started) == 1 and first.running == ["mail"]
    second = _gateway("gw-1", stores[1], clock, ScriptedAgent(), sent, tmp_path)
    assert await second.tick() == []
    assert second.jobs.require("mail").last_outcome == "running"  # not "interrupted"
    for task in started:
        task.cancel()
    await asyncio.gather(*started, return_exceptions=True)
