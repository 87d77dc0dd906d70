"""Cron test parts: a scripted agent loop, a recording delivery, and a wired service."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from vikingbot.agent.types import TurnResult
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.cron.service import CronService
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey
from vikingbot.store.db import StateStore
from vikingbot.workspace.manager import WorkspaceManager

START = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@dataclass
class ScriptedAgent:
    """An AgentLoop whose replies are set by the test; records every turn."""

    reply: str | None = "Done: 3 new mails."
    error: Exception | None = None
    hang: bool = False
    turns: list[tuple[str, SessionKey, dict[str, Any]]] = field(default_factory=list)

    async def run_turn(
        self, prompt: str, session_key: SessionKey, metadata: dict[str, Any] | None = None
    ) -> TurnResult:
        self.turns.append((prompt, session_key, dict(metadata or {})))
        if self.hang:
            await asyncio.Event().wait()
        if self.error is not None:
            raise self.error
        return TurnResult(text=self.reply, model_calls=1)


@dataclass
class RecordingDelivery:
    sent: list[dict[str, Any]] = field(default_factory=list)
    fail: bool = False

    async def deliver(
        self, text: str, target: str, *, sessions: Any, dedupe_key: str, source: str
    ) -> None:
        if self.fail:
            raise RuntimeError("platform down")
        self.sent.append(
            {"text": text, "target": target, "dedupe_key": dedupe_key, "source": source}
        )


@dataclass
class CronRig:
    service: CronService
    agent: ScriptedAgent
    delivery: RecordingDelivery
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
    delivery = RecordingDelivery()
    config = Config.model_validate({"bot": {"heartbeat": {"taskTimeoutS": 5}}})
    service = CronService(
        config,
        store=store,
        agent=agent,
        delivery=delivery,
        sessions=sessions,
        workspaces=workspaces,
        clock=clock,
    )
    return CronRig(service, agent, delivery, clock, sessions, store)
