"""Fixtures for the MCP tests: a fake model, a loop with MCP servers, a state store."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.mcp.hub import McpHub
from vikingbot.session.store import SessionStore
from vikingbot.store.db import StateStore
from vikingbot.testing.fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as fake:
        yield fake


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def sqlite_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    path = tmp_path / "state.db"
    shutil.copyfile(request.getfixturevalue("_sqlite_template"), path)
    with StateStore.open(f"sqlite:///{path}") as st:
        yield st


def mcp_config(
    base_url: str, servers: dict[str, Any], *, heartbeat: dict[str, Any] | None = None
) -> Config:
    return Config.model_validate(
        {
            "bot": {
                "agents": {"provider": "openai", "model": "test-model"},
                "providers": {
                    "openai": {"apiBase": base_url, "apiKey": "sk-test", "maxRetries": 0}
                },
                "tools": {"mcpServers": servers},
                "heartbeat": heartbeat or {},
            }
        }
    )


Agent = tuple[BuiltinLoop, McpHub]


@pytest.fixture
async def make_agent(
    tmp_path: Path, sqlite_store: StateStore
) -> AsyncIterator[Callable[..., Agent]]:
    """``make_agent(config)``: a built-in loop whose MCP hub is closed after the test."""
    made: list[tuple[BuiltinLoop, McpHub]] = []
    sessions = SessionStore(tmp_path / "sessions", clock=FakeClock())

    def make(config: Config, **kwargs: Any) -> Agent:
        hub = McpHub(
            config,
            environ=dict(os.environ),
            logs=tmp_path / "logs",
            pins=tmp_path / "data" / "mcp" / "approved.json",
            turn_wait_s=120,  # a loaded CI machine can take longer than a turn's 15 s to start one
        )
        loop = BuiltinLoop(config, sessions=sessions, store=sqlite_store, mcp=hub, **kwargs)
        made.append((loop, hub))
        return loop, hub

    yield make
    for loop, hub in made:
        await loop.aclose()
        await hub.aclose()
