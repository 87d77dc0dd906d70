"""Fixtures for provider tests: scripted fake model servers on loopback."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

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
def closed_port_url() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
async def closing() -> AsyncIterator[list[Any]]:
    """Append providers here; they are closed (HTTP pools released) after the test."""
    opened: list[Any] = []
    yield opened
    for p in opened:
        await p.aclose()
