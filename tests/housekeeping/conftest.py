"""Housekeeping test parts: sessions on disk with messages at chosen times."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.housekeeping.service import HousekeepingService
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message
from vikingbot.store.db import StateStore
from vikingbot.workspace.manager import WorkspaceManager

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def msg(role: str, content: str, days_ago: float = 0, **extra: object) -> Message:
    return Message(role=role, content=content, timestamp=NOW - timedelta(days=days_ago), **extra)  # type: ignore[arg-type]


@dataclass
class Housekeeping:
    service: HousekeepingService
    sessions: SessionStore
    workspaces: WorkspaceManager
    store: StateStore
    clock: FakeClock
    now: datetime = NOW

    @staticmethod
    def msg(role: str, content: str, days_ago: float = 0, **extra: object) -> Message:
        """A message ``days_ago`` days before the rig's start time."""
        return msg(role, content, days_ago, **extra)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[StateStore]:
    """SQLite only, for tests whose logic does not depend on the backend (the SQL they
    run is covered on both backends by the tests that use ``store``)."""
    st = StateStore.open(f"sqlite:///{tmp_path / 'state.db'}")
    yield st
    st.close()


def _rig(store: StateStore, tmp_path: Path) -> Housekeeping:
    clock = FakeClock(NOW)
    store.clock = clock
    sessions = SessionStore(tmp_path / "sessions", clock)
    workspaces = WorkspaceManager(tmp_path / "workspace")
    config = Config.model_validate(
        {"bot": {"memory": {"historyMaxDays": 30, "consolidateAfterIdle": "6h"}}}
    )
    service = HousekeepingService(
        config, store=store, sessions=sessions, workspaces=workspaces, clock=clock
    )
    return Housekeeping(service, sessions, workspaces, store, clock)


@pytest.fixture
def hk(sqlite_store: StateStore, tmp_path: Path) -> Housekeeping:
    """Housekeeping on SQLite."""
    return _rig(sqlite_store, tmp_path)


@pytest.fixture
def hk_db(store: StateStore, tmp_path: Path) -> Housekeeping:
    """Housekeeping on each backend (SQLite and PostgreSQL), for the SQL that differs."""
    return _rig(store, tmp_path)
