"""Issue 16: a HEARTBEAT.md problem is logged once per change of the file, not every cycle,
and a mistyped key is told with the key it most looks like."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger

from tests.support.harness import build_harness, with_tasks
from tests.support.signatures import tick
from vikingbot.testing.fake_openai import FakeOpenAI


@pytest.fixture
def errors_logged() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="ERROR")
    yield lines
    logger.remove(sink)


async def test_a_typo_is_logged_once_per_change_and_told_once(
    tmp_path: Path, fake: FakeOpenAI, errors_logged: list[str]
) -> None:
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks("- evry: 30m title: Reviews task: Summarise new review requests."))
        for _ in range(4):
            await tick(h, "")
        problems = [m for m in errors_logged if "HEARTBEAT.md problem" in m]
        assert len(problems) == 1
        assert problems[0].endswith(":6: evry: is not a key; did you mean every:?"), problems[0]
        told = [t for t in h.texts() if "HEARTBEAT.md problem" in t]
        assert len(told) == 1 and "did you mean every:?" in told[0]

        # an edit that adds a second problem logs the file's problems again (both)
        h.write(
            with_tasks(
                "- evry: 30m title: Reviews task: Summarise new review requests.",
                "- dialy: 08:30 title: Brief task: Today's calendar.",
            )
        )
        await tick(h, "")
        await tick(h, "")
        problems = [m for m in errors_logged if "HEARTBEAT.md problem" in m]
        assert len(problems) == 3
        assert problems[-1].endswith(":7: dialy: is not a key; did you mean daily:?")

        # fixed, then broken the same way again: news for the log once more
        h.write(with_tasks("- every: 30m title: Reviews task: Summarise new review requests."))
        await tick(h, "")
        h.write(with_tasks("- evry: 30m title: Reviews task: Summarise new review requests."))
        await tick(h, "")
        await tick(h, "")
        assert len([m for m in errors_logged if "HEARTBEAT.md problem" in m]) == 4


async def test_an_unconfigured_checker_costs_no_model_call_and_is_told_once(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """Issue 16: the README's `only-if: github:prs` without a github checker ran the model
    on every cycle, failing open without a word in `plan`."""
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks("- every: 10m only-if: github:prs title: Reviews task: Summarise."))
        rows = []
        for _ in range(4):
            rows += await tick(h, "Reviews")
        assert set(rows) == {("skip", "checker-missing", None)}
        assert h.model_calls() == 0
        told = [t for t in h.texts() if "only-if: github is not configured" in t]
        assert len(told) == 1, h.texts()
        assert "add bot.heartbeat.checkers.github" in told[0]
