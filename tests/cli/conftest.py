"""Fixtures for CLI tests: an empty home folder and a runner that drives `vikingbot`
in-process with nothing from the developer's own VIKINGBOT_* environment."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest
from loguru import logger
from typer.testing import CliRunner, Result

from tests.support.cli import Cli
from vikingbot.cli.app import app
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Commands point loguru at the runner's (then closed) stderr; undo that afterwards."""
    yield
    logger.remove()
    logger.add(sys.stderr)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty (not yet existing) VIKINGBOT_HOME; no stray variables, no ./.env."""
    for name in list(os.environ):
        if name.startswith("VIKINGBOT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


@pytest.fixture
def cli(home: Path) -> Cli:
    """``cli("status", "--json", env={...})`` runs the command and returns its result."""

    def run(*args: str, env: Mapping[str, str] | None = None) -> Result:
        full_env = {"VIKINGBOT_HOME": str(home), **(env or {})}
        return CliRunner().invoke(app, list(args), env=full_env)

    return run


@pytest.fixture
def fresh_session(home: Path) -> Callable[[str], None]:
    """Create a chat session whose last user message is from just now."""

    def make(key: str = "telegram:default:42") -> None:
        store = SessionStore(home / "data" / "sessions")
        store.get_or_create(key)
        store.append(key, Message("user", "hello", datetime.now(UTC)))

    return make


@pytest.fixture
def shared(cli: Cli, home: Path, fresh_session: Callable[[str], None]) -> Path:
    """An onboarded home with one fresh chat session in the shared workspace."""
    assert cli("onboard").exit_code == 0
    fresh_session("telegram:default:42")
    return home / "data" / "workspace" / "shared"
