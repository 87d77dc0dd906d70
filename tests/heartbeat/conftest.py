"""Heartbeat test fixtures; the harness itself is ``tests.support.harness``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.harness import (
    OWNER,
    TEMPLATE,
    Harness,
    build_harness,
    make_config,
    with_tasks,
)
from vikingbot.testing.fake_openai import FakeOpenAI

__all__ = ["OWNER", "TEMPLATE", "Harness", "build_harness", "make_config", "with_tasks"]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as f:
        yield f


@pytest.fixture
async def harness(tmp_path: Path, fake: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in build_harness(tmp_path, fake):
        yield h
