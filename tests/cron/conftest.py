"""Cron test parts: a scripted agent loop, real delivery onto a recording bus, a wired service."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.scripted_agent import START, ScriptedAgent, Sent
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.cron.service import CronService
from vikingbot.delivery.service import DeliveryService
from vikingbot.session.store import SessionStore
from vikingbot.store.db import StateStore
from vikingbot.workspace.manager import WorkspaceManager

__all__ = ["START", "CronRig", "ScriptedAgent", "Sent"]


@dataclass
class CronRig:
    service: CronService
    agent: ScriptedAgent
    sent: Sent
    clock: FakeClock
    sessions: SessionStore
    store: StateStore


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[StateStore]:
    """SQLite only, for tests whose logic does not depend on the backend (the SQL they
    run is covered on both backends by the tests that use ``store``)."""
    st = StateStore.open(f"sqlite:///{tmp_path / 'state.db'}")
    yield st
    st.close()


@pytest.fixture
def rig(sqlite_store: StateStore, tmp_path: Path) -> CronRig:
    store = sqlite_store
    clock = FakeClock(START)
    store.clock = clock
    sessions = SessionStore(tmp_path / "sessions", clock)
    workspaces = WorkspaceManager(tmp_path / "workspace")
    agent = ScriptedAgent()
    config = Config.model_validate(
        {
            "bot": {
                "owner": "telegram:42",
                "heartbeat": {"taskTimeoutS": 5},
                "channels": {"telegram": {"enabled": True, "allowFrom": ["7"]}},
            }
        }
    )
    sent = Sent()
    delivery = DeliveryService(config, store=store, sessions=sessions, clock=clock, sink=sent)
    service = CronService(
        config,
        store=store,
        agent=agent,
        delivery=delivery,
        sessions=sessions,
        workspaces=workspaces,
        clock=clock,
    )
    return CronRig(service, agent, sent, clock, sessions, store)
