"""Fixtures for checker tests: build checker configs and run them like the heartbeat does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path

import pytest
from loguru import logger

from vikingbot.config.schema import CheckerConfig
from vikingbot.heartbeat.checkers import CheckResult, run_check

RunCheck = Callable[..., Awaitable[CheckResult]]


@pytest.fixture
def run(tmp_path: Path) -> RunCheck:
    """``await run(config, scope=None, environ={})``: run one configured checker named "c"."""

    async def _run(
        config: CheckerConfig,
        scope: str | None = None,
        environ: Mapping[str, str] | None = None,
        name: str = "c",
    ) -> CheckResult:
        return await run_check(
            name,
            scope,
            {name: config},
            state_dir=tmp_path / "checker-state",
            environ={} if environ is None else environ,
        )

    return _run


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    """Every log line (message and bound extras) written while the test runs."""
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="DEBUG", format="{message} {extra}")
    yield lines
    logger.remove(sink)
