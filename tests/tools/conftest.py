"""Fixtures for tool tests: a workspace, a config and a ToolContext around them."""

from __future__ import annotations

from pathlib import Path

import pytest

from vikingbot.bus import MessageBus
from vikingbot.config.schema import Config
from vikingbot.session.types import SessionKey
from vikingbot.tools.base import ToolContext


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def config() -> Config:
    return Config()


@pytest.fixture
def ctx(workspace: Path, config: Config) -> ToolContext:
    return ToolContext(
        workspace=workspace,
        session_key=SessionKey("cli", "default", "local"),
        config=config,
        bus=MessageBus(),
    )
