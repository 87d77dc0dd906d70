"""End to end: `vikingbot gateway` as a real child process against loopback fakes.

The home and its helpers are ``tests.support.home``; these are the fixtures.
Every gateway a test starts is killed at teardown, also when the test fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import TIMEOUT_S, Home
from vikingbot.testing.fake_openai import FakeOpenAI


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as fake:
        yield fake


@pytest.fixture
def telegram() -> Iterator[tuple[FakeTelegram, str]]:
    fake = FakeTelegram()
    with fake.serve() as api_base:
        yield fake, api_base


@pytest.fixture
def home(tmp_path: Path, llm: FakeOpenAI, telegram: tuple[FakeTelegram, str]) -> Home:
    fake, api = telegram
    h = Home(tmp_path / "home", llm, fake, api)
    h.write_config()
    return h


@pytest.fixture
def gateways() -> Iterator[Callable[[Home], GatewayProcess]]:
    """Start gateways for a home; each one still running at teardown is killed."""
    started: list[GatewayProcess] = []

    def start(home: Home) -> GatewayProcess:
        gw = GatewayProcess(home.path, start_timeout_s=TIMEOUT_S)
        started.append(gw)
        return gw.start()

    yield start
    for gw in started:
        if gw.proc is not None and gw.proc.poll() is None:
            gw.kill()
