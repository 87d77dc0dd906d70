"""The heartbeat with the command provider: a missing program is an outage, not a failure."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Harness, build_harness, make_config, with_tasks
from vikingbot.config.schema import Config
from vikingbot.testing.fake_openai import FakeOpenAI


@pytest.fixture
async def command_harness(tmp_path: Path, fake: FakeOpenAI) -> AsyncIterator[Harness]:
    data: dict[str, Any] = make_config(fake.base_url).model_dump(mode="json", by_alias=False)
    program = tmp_path / "bin" / "my-agent"  # not there yet
    data["bot"]["agents"] = {"provider": "mine", "model": ""}
    data["bot"]["providers"] = {"mine": {"kind": "command", "command": [str(program)]}}
    data["bot"]["heartbeat"]["mode"] = "per-task"
    async for h in build_harness(tmp_path, fake, Config.model_validate(data)):
        yield h


async def test_a_missing_command_is_provider_down_told_once_down_and_once_back(
    command_harness: Harness, tmp_path: Path
) -> None:
    h = command_harness
    path = h.write(with_tasks("- Check the mail"))
    outcomes: list[str | None] = []

    async def cycles(n: int) -> None:
        for _ in range(n):
            h.user_session()
            report = await h.cycle()
            outcomes.extend(r.outcome for r in report.rows if r.decision == "run")
            h.clock.advance(hours=1)  # past the outage backoff: the next cycle tries

    await cycles(3)
    assert outcomes and set(outcomes) == {"provider-down"}
    assert "parked" not in path.read_text()
    program = tmp_path / "bin" / "my-agent"  # installed: it answers
    program.parent.mkdir()
    program.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\nprint('HEARTBEAT_OK')\n")
    program.chmod(0o755)
    await cycles(2)
    assert outcomes[-1] == "completed" and "failed" not in outcomes
    texts = h.texts()
    down = [t for t in texts if "cannot be reached" in t]
    assert len(down) == 1 and "'" + str(program) + "' was not found" in down[0]
    assert sum("answers again" in t for t in texts) == 1
