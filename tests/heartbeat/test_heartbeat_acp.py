"""The heartbeat with the acp loop: an external agent's answer is delivered, HEARTBEAT_OK is not."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import vikingbot
from tests.support.harness import OWNER, Harness, build_harness, make_config, with_tasks
from vikingbot.config.schema import Config
from vikingbot.testing.fake_openai import FakeOpenAI

pytest.importorskip("acp")


def acp_config(base_url: str, script: Path, log: Path) -> Config:
    data: dict[str, Any] = make_config(base_url).model_dump(mode="json", by_alias=False)
    data["bot"]["agents"] = {
        "loop": "acp",
        "acp": {
            "command": sys.executable,
            "args": ["-m", "vikingbot.testing.fake_acp_agent", str(script), str(log)],
            # the harness gives the agent an empty environment: name the tree under test,
            # or the agent would import whichever vikingbot is installed
            "env": {"PYTHONPATH": str(Path(vikingbot.__file__).resolve().parents[1])},
        },
    }
    data["bot"]["channels"]["telegram"]["token"] = "t"
    return Config.model_validate(data)


@pytest.fixture
async def acp_harness(tmp_path: Path, fake: FakeOpenAI) -> AsyncIterator[Harness]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"*": [{"text": "HEARTBEAT_OK"}]}))
    config = acp_config(fake.base_url, script, tmp_path / "log.jsonl")
    async for h in build_harness(tmp_path, fake, config):
        yield h


async def test_an_acp_agents_heartbeat_answer_reaches_the_owner(
    acp_harness: Harness, tmp_path: Path
) -> None:
    h = acp_harness
    assert h.rt.readiness().ready
    h.user_session()
    h.write(with_tasks("- Check the build"))
    (tmp_path / "script.json").write_text(json.dumps({"*": [{"text": "The build is red."}]}))
    report = await h.cycle()
    assert h.texts() == ["The build is red."]
    assert (h.sent[0].channel, h.sent[0].chat_id) == ("telegram", "42")
    assert [r.outcome for r in report.rows if r.decision == "run"] == ["delivered"]
    assert h.model_calls() == 0  # the external agent answered, not the model provider
    prompts = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    texts = [p["texts"] for p in prompts if p["kind"] == "prompt"]
    assert "Nobody is watching this turn" in texts[0][0]  # the unattended rules went along


async def test_heartbeat_ok_from_an_acp_agent_delivers_nothing(acp_harness: Harness) -> None:
    h = acp_harness
    h.user_session()
    h.write(with_tasks("- Check the mail"))
    before = h.rt.sessions.read_messages(OWNER)
    await h.cycle()
    assert h.sent == []
    assert h.rt.sessions.read_messages(OWNER) == before
    assert h.rt.sessions.read_messages(h.hb.heartbeat_session_key("shared")) == []


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ({"_startup": "exit", "*": [{"text": "HEARTBEAT_OK"}]}, "failed to start"),
        ({"*": [{"crash": 3}]}, "stopped during the turn"),
    ],
    ids=["cannot-start", "dies-mid-turn"],
)
async def test_an_acp_agent_that_is_down_is_an_outage_told_once_down_and_once_back(
    acp_harness: Harness, tmp_path: Path, broken: dict[str, Any], said: str
) -> None:
    """As for a model API that cannot be reached: provider-down, nothing failed or
    parked, the owner told once that it is down and once that it is back."""
    h = acp_harness
    script = tmp_path / "script.json"
    script.write_text(json.dumps(broken))
    h.write(with_tasks("- Check the mail"))
    outcomes: list[str | None] = []
    for _ in range(3):
        h.user_session()
        report = await h.cycle()
        outcomes += [r.outcome for r in report.rows if r.decision == "run"]
        h.clock.advance(hours=1)  # past the outage backoff: the next cycle tries
    assert outcomes and set(outcomes) == {"provider-down"}
    script.write_text(json.dumps({"*": [{"text": "HEARTBEAT_OK"}]}))
    for _ in range(2):
        h.user_session()
        report = await h.cycle()
        outcomes += [r.outcome for r in report.rows if r.decision == "run"]
        h.clock.advance(hours=1)
    assert outcomes[-1] == "noop" and "failed" not in outcomes
    texts = h.texts()
    down = [t for t in texts if "cannot be reached" in t]
    assert len(down) == 1 and said in down[0]
    assert sum("answers again" in t for t in texts) == 1
