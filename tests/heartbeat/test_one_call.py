"""Issue 31: a heartbeat turn costs one model call, against a model that acts like a real one.

The model (``tests.support.real_model.RealModel``) reads HEARTBEAT.md with
``read_file`` when the file's text is not in what it was sent, and calls any
offered tool the task names; the turns go through the real loop, the ``openai``
SDK and the fake server on loopback.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.harness import build_harness, with_tasks
from tests.support.real_model import RealModel
from vikingbot.heartbeat.prompts import CHECKLIST_PROMPT, capped
from vikingbot.testing.fake_openai import FakeOpenAI

QUIET = "Look over my notes and tell me only if something is overdue."
STRETCH = "Send me a `message` that says it is time to stretch."
DISK = "Run `exec` with df -h and send me a `message` with the free space."


async def test_a_no_op_checklist_turn_is_one_call(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.responder = RealModel(QUIET)
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks(f"- {QUIET}", "- every: 1h title: Later task: not in the checklist"))
        report = await h.cycle()
        assert [r.outcome for r in report.rows if r.decision == "run"] == ["noop"]
        assert h.model_calls() == 1
        prompt = fake.requests[0].last_user_text
        assert prompt.startswith(CHECKLIST_PROMPT)  # the spec's text, verbatim, first
        assert f"- {QUIET}" in prompt
        assert "not in the checklist" not in prompt  # scheduled entries run on their own


async def test_a_message_turn_is_two_calls_and_the_message_arrives(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    fake.responder = RealModel(STRETCH)
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks(f"- {STRETCH}"))
        await h.cycle()
        assert h.model_calls() == 2
        assert h.texts() == ["Time to stretch."]


async def test_unattended_turns_are_offered_only_what_may_run(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """A task naming `exec` is not offered exec, so no round is spent on a refusal."""
    fake.responder = RealModel(DISK)
    async for h in build_harness(tmp_path, fake):
        h.rt.config.bot.tools.auto_deny = ["grep"]
        h.user_session()
        h.write(with_tasks(f"- {DISK}"))
        await h.cycle()
        offered = set(fake.requests[0].tool_names)
        safe = set(h.rt.config.bot.heartbeat.safe_tools) - {"grep"}
        assert offered == safe  # safe_tools (with message), after auto_deny
        assert {"exec", "write_file", "edit_file", "grep"}.isdisjoint(offered)
        assert h.model_calls() == 2  # message, then the answer: no refused exec round
        assert h.texts() == ["Time to stretch."]


def test_the_checklist_is_cut_at_max_file_bytes_on_a_whole_character() -> None:
    """The file itself is refused over the cap; the block is cut there too, never mid-character."""
    text = "- " + "ü" * 40
    cut = capped(text, 11)
    assert cut.startswith("- üüüü") and "ü" * 5 not in cut
    assert cut.endswith("read the rest with read_file]")
    assert capped(text, 1000) == text


async def test_a_task_turn_carries_its_entry_and_state(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script(["still going HEARTBEAT_KEEP"])
    async for h in build_harness(tmp_path, fake, mode="per-task"):
        h.user_session()
        h.write(with_tasks("- Water the plants <!-- deliver:owner -->"))
        await h.cycle()
        first = fake.requests[0].last_user_text
        assert "- Water the plants <!-- deliver:owner -->" in first
        assert "never run before" in first
        h.clock.advance(seconds=700)
        h.user_session()
        await h.cycle()
        assert "last outcome kept" in fake.requests[1].last_user_text


async def test_light_context_sends_no_workspace_files_and_full_does(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async for h in build_harness(tmp_path, fake, context="full"):
        h.user_session()
        h.write(with_tasks(f"- {QUIET}"))
        (h.workspace() / "SOUL.md").write_text("I am Brünhilde, terse and exact.\n")
        await h.cycle()
        assert "I am Brünhilde" in fake.requests[-1].system
        h.rt.config.bot.heartbeat.context = "light"
        h.clock.advance(seconds=700)
        h.user_session()
        await h.cycle()
        light = fake.requests[-1]
        assert "I am Brünhilde" not in light.system
        assert "Nobody is watching this turn" in light.system  # the unattended rules stay
        assert f"- {QUIET}" in light.last_user_text  # and the checklist
        assert [m["role"] for m in light.messages] == ["system", "user"]  # no history
