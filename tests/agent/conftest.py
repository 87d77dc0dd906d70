"""Fixtures for agent tests: a session store, a workspace, fake model servers, a loop factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.bus import MessageBus
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.session.store import SessionStore
from vikingbot.testing.fake_anthropic import FakeAnthropic
from vikingbot.testing.fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as fake:
        yield fake


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic.start() as fake:
        yield fake


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sessions(tmp_path: Path, clock: FakeClock) -> SessionStore:
    return SessionStore(tmp_path / "sessions", clock=clock)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "SOUL.md").write_text("I am Ragnar, a careful assistant.\n")
    return ws


def make_agent_config(base_url: str, kind: str = "openai", **agents: Any) -> Config:
    """Config selecting ``kind`` pointed at a fake server, with ``bot.agents`` overrides."""
    return Config.model_validate(
        {
            "bot": {
                "agents": {"provider": kind, "model": f"{kind}-test-model", **agents},
                "providers": {kind: {"apiBase": base_url, "apiKey": "sk-test", "maxRetries": 1}},
            }
        }
    )


LoopFactory = Callable[..., BuiltinLoop]


@pytest.fixture
def agent_config() -> Callable[..., Config]:
    """``agent_config(base_url, kind="openai", **agents)`` (see ``make_agent_config``)."""
    return make_agent_config


@pytest.fixture
async def make_loop(
    sessions: SessionStore, clock: FakeClock, workspace: Path
) -> AsyncIterator[LoopFactory]:
    """``make_loop(config, **kwargs)``: a BuiltinLoop on the test session store; closed after."""
    made: list[BuiltinLoop] = []

    def make(config: Config, **kwargs: Any) -> BuiltinLoop:
        kwargs.setdefault("bus", MessageBus())
        loop = BuiltinLoop(config, sessions=sessions, clock=clock, **kwargs)
        made.append(loop)
        return loop

    yield make
    for loop in made:
        await loop.aclose()
