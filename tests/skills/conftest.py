"""Fixtures for skills tests: a fake OpenAI server and a built-in loop with a home's skills."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.session.store import SessionStore
from vikingbot.testing.fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as fake:
        yield fake


@pytest.fixture
async def make_loop(tmp_path: Path) -> AsyncIterator[Callable[..., BuiltinLoop]]:
    """``make_loop(base_url, **config)``: a built-in loop whose user skills are
    ``tmp_path/home/skills``."""
    made: list[BuiltinLoop] = []

    def make(base_url: str, **bot: Any) -> BuiltinLoop:
        config = Config.model_validate(
            {
                "bot": {
                    "agents": {"provider": "openai", "model": "test-model"},
                    "providers": {"openai": {"apiBase": base_url, "apiKey": "sk-test"}},
                    **bot,
                }
            }
        )
        loop = BuiltinLoop(
            config,
            sessions=SessionStore(tmp_path / "sessions", clock=FakeClock()),
            clock=FakeClock(),
            user_skills=tmp_path / "home" / "skills",
        )
        made.append(loop)
        return loop

    yield make
    for loop in made:
        await loop.aclose()
