"""Issue 31: heartbeat turns have a model (and provider) of their own, an entry may name
its own with ``model:``, prices per model feed the budget, `plan` shows the model."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.heartbeat.conftest import build_harness, make_config, with_tasks
from vikingbot.config.schema import Config, FallbackModel
from vikingbot.gateway.ops import heartbeat_plan
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.testing.fake_openai import FakeOpenAI, reply


def _config(fake: FakeOpenAI, cheap: FakeOpenAI | None = None, **heartbeat: object) -> Config:
    data = make_config(fake.base_url).model_dump(mode="json", exclude_none=True)
    data["bot"]["heartbeat"].update(heartbeat)
    data["bot"]["providers"]["openai"]["api_key"] = "sk-test"
    data["bot"]["providers"]["openai"]["prices"] = {
        "small-model": {"input": 1_000_000.0, "output": 0.0}  # 1 USD a token in
    }
    if cheap is not None:
        data["bot"]["providers"]["cheap"] = {
            "kind": "openai",
            "api_base": cheap.base_url,
            "api_key": "sk-cheap",
            "max_retries": 0,
        }
    return Config.model_validate(data)


async def test_heartbeat_turns_use_their_model_and_an_entry_its_own(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    cfg = _config(fake, model="small-model", mode="per-task")
    async for h in build_harness(tmp_path, fake, cfg):
        h.user_session()
        h.write(with_tasks("- Check the build", "- model: big-model task: Review my week"))
        plan = heartbeat_plan(h.hb, None)
        shown = {d["entry"]: d["model"] for d in plan["decisions"] if d["decision"] == "run"}
        assert shown == {
            "Check the build": "openai / small-model",
            "model: big-model task: Review my week": "openai / big-model",
        }
        report = await h.cycle()
        assert sorted(r.model for r in fake.requests) == ["big-model", "small-model"]
        costs = {r.entry: r.cost_usd for r in report.rows if r.decision == "run"}
        assert costs["Check the build"] > 1  # small-model's price (1 USD a token in)
        assert costs["model: big-model task: Review my week"] == 0  # no price for big-model
        chat = await h.rt.agent().run_turn(
            "hi", "telegram:default:42", {"workspace": str(tmp_path)}
        )
        assert chat.ended == "final" and fake.requests[-1].model == "fake-model"


async def test_heartbeat_turns_go_to_their_own_provider(tmp_path: Path, fake: FakeOpenAI) -> None:
    with FakeOpenAI.start() as cheap:
        cheap.script([reply("HEARTBEAT_OK")])
        cfg = _config(fake, cheap, provider="cheap", model="tiny")
        async for h in build_harness(tmp_path, fake, cfg):
            h.user_session()
            h.write(with_tasks("- Check the build"))
            await h.cycle()
            assert [r.model for r in cheap.requests] == ["tiny"]
            assert fake.requests == []
            assert cheap.requests[0].headers["authorization"] == "Bearer sk-cheap"


def test_an_unknown_heartbeat_provider_is_refused_with_the_nearest_name() -> None:
    with pytest.raises(
        ValidationError, match=r"bot.heartbeat.provider 'chaep'.*did you mean cheap"
    ):
        Config.model_validate(
            {
                "bot": {
                    "providers": {"cheap": {"kind": "openai"}},
                    "heartbeat": {"provider": "chaep"},
                }
            }
        )


@pytest.mark.parametrize(
    ("line", "model", "task", "error"),
    [
        ("- model: gpt-4o-mini task: Check the build", "gpt-4o-mini", "Check the build", None),
        ("- modell: llama3.1:8b aufgabe: Lies die Mails", "llama3.1:8b", "Lies die Mails", None),
        ("- every: 1h title: T model: cheap-1 task: x", "cheap-1", "x", None),
        ("- model: two words task: x", None, "x", "model: needs a model name in one word"),
        ("- model: task: x", None, "x", "model: needs a model name in one word"),
    ],
)
def test_the_model_key(line: str, model: str | None, task: str, error: str | None) -> None:
    (entry,) = parse_heartbeat(f"## Active Tasks\n{line}\n").entries
    assert (entry.model, entry.prompt_text) == (model, task)
    if error is None:
        assert entry.error is None
    else:
        assert error in (entry.error or "")


async def test_a_heartbeat_run_in_an_outage_is_answered_by_the_fallback_and_says_so(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """Issue 47: the heartbeat's own provider answers 503; the fallback model answers the
    run, and the ledger row names it."""
    from vikingbot.testing.fake_openai import error

    with FakeOpenAI.start() as cheap:
        cheap.script([error(503)])
        fake.script([reply("HEARTBEAT_OK")])
        cfg = _config(fake, cheap, provider="cheap", model="tiny")
        cfg.bot.agents.fallback_models = [FallbackModel(provider="openai", model="spare")]
        async for h in build_harness(tmp_path, fake, cfg):
            h.user_session()
            h.write(with_tasks("- Check the build"))
            report = await h.cycle()
            runs = [r for r in report.rows if r.decision == "run"]
            assert [(r.outcome, r.model) for r in runs] == [("noop", "openai/spare")]
            assert [r.model for r in cheap.requests] == ["tiny"]
            assert [r.model for r in fake.requests] == ["spare"]
