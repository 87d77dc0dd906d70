"""Cron test parts: a scripted agent loop, real delivery onto a recording bus, a wired service."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from vikingbot.agent.types import TurnResult
from vikingbot.bus import MessageBus, OutboundMessage
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.cron.service import CronService
from vikingbot.delivery.service import DeliveryService
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey
from vikingbot.store.db import StateStore
from vikingbot.tools.base import Deliver
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
        self,
        prompt: str,
        session_key: SessionKey,
        metadata: dict[str, Any] | None = None,
        *,
        deliver: Deliver | None = None,
    ) -> TurnResult:
        self.turns.append((prompt, session_key, dict(metadata or {})))
        if self.hang:
            await asyncio.Event().wait()
        if self.error is not None:
            raise self.error
        return TurnResult(text=self.reply, model_calls=1)


@dataclass
class Sent:
    """The platform side of the bus: records what delivery sent (or refuses it)."""

    messages: list[OutboundMessage] = field(default_factory=list)
    fail: bool = False

    async def __call__(self, msg: OutboundMessage) -> bool:
        if self.fail:
            return False
        self.messages.append(msg)
        return True

    @property
    def chats(self) -> list[tuple[str, str, str]]:
        """(channel:chat, text, source) of every message sent."""
        return [
            (f"{m.channel}:{m.chat_id}", m.text, str(m.metadata.get("source")))
            for m in self.messages
        ]


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
    bus = MessageBus()
    bus.set_outbound_handler(sent)
    delivery = DeliveryService(config, store=store, sessions=sessions, bus=bus, clock=clock)
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
