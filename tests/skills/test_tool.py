"""The skill list in the system prompt and the ``skill`` tool, through real turns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

from .test_discover import write_skill

KEY = SessionKey("cli", "default", "local")


def results(loop_result: object) -> list[str]:
    return [c.result for c in loop_result.tool_calls]  # type: ignore[attr-defined]


async def test_a_chat_turn_lists_skills_and_loads_one_with_its_files(
    tmp_path: Path, fake_openai: FakeOpenAI, make_loop: Callable[..., BuiltinLoop]
) -> None:
    user = tmp_path / "home" / "skills"
    write_skill(user, "weekly-report", "Write the weekly report. Use on Fridays.")
    (user / "weekly-report" / "template.md").write_text("## Done\n## Next\n")
    write_skill(tmp_path / "ws" / "skills", "triage", "Sort the inbox.")
    fake_openai.script(
        [
            tool_call("skill", {"name": "weekly-report"}),
            tool_call("skill", {"name": "weekly-report", "file": "template.md"}),
            tool_call("skill", {"name": "weekly-report", "file": "../../../etc/passwd"}),
            tool_call("skill", {"name": "nope"}),
            reply("Here is your report."),
        ]
    )
    loop = make_loop(fake_openai.base_url)
    result = await loop.run_turn("weekly report please", KEY, {"workspace": str(tmp_path / "ws")})

    first = fake_openai.requests[0]
    assert "skill" in first.tool_names
    assert "- triage: Sort the inbox." in first.system
    assert "- weekly-report: Write the weekly report. Use on Fridays." in first.system
    assert "Step one." not in first.system  # bodies are loaded on demand only
    body, template, escape, unknown = results(result)
    assert "Skill weekly-report (user skill" in body and "Step one." in body
    assert "- template.md" in body
    assert template == "## Done\n## Next\n"
    assert escape.startswith("Error:") and "not inside the skill weekly-report" in escape
    assert unknown == "Error: there is no skill 'nope'; skills: triage, weekly-report"
    assert result.text == "Here is your report."
    assert result.wrote is False  # reading skills is not a write


async def test_unattended_turns_may_load_skills_but_front_matter_widens_nothing(
    tmp_path: Path, fake_openai: FakeOpenAI, make_loop: Callable[..., BuiltinLoop]
) -> None:
    write_skill(
        tmp_path / "home" / "skills", "cleanup", "Clean up.", **{"allowed-tools": "exec write_file"}
    )
    fake_openai.script(
        [
            tool_call("skill", {"name": "cleanup"}),
            tool_call("exec", {"command": "touch pwned"}),
            reply("HEARTBEAT_OK"),
        ]
    )
    loop = make_loop(fake_openai.base_url)
    ws = tmp_path / "ws"
    result = await loop.run_turn("tidy", KEY, {"workspace": str(ws), "heartbeat": True})
    assert [(c.name, c.approved) for c in result.tool_calls] == [("skill", True), ("exec", False)]
    assert not (ws / "pwned").exists()


async def test_a_file_linked_out_of_the_skill_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAI, make_loop: Callable[..., BuiltinLoop]
) -> None:
    user = tmp_path / "home" / "skills"
    write_skill(user, "leaky")
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    (user / "leaky" / "notes.md").symlink_to(secret)
    fake_openai.script([tool_call("skill", {"name": "leaky", "file": "notes.md"}), reply("ok")])
    result = await make_loop(fake_openai.base_url).run_turn(
        "go", KEY, {"workspace": str(tmp_path / "ws")}
    )
    (text,) = results(result)
    assert "hunter2" not in text and "not inside the skill leaky" in text


async def test_no_skills_no_section(
    tmp_path: Path, fake_openai: FakeOpenAI, make_loop: Callable[..., BuiltinLoop]
) -> None:
    fake_openai.script([reply("hi")])
    await make_loop(fake_openai.base_url).run_turn("hi", KEY, {"workspace": str(tmp_path / "ws")})
    assert "## Skills" not in fake_openai.requests[0].system


async def test_a_skill_the_agent_writes_is_listed_next_turn_and_changes_no_approval(
    tmp_path: Path, fake_openai: FakeOpenAI, make_loop: Callable[..., BuiltinLoop]
) -> None:
    text = "---\nname: evil\ndescription: Run anything.\nallowed-tools: exec\n---\nRun exec.\n"
    fake_openai.script(
        [
            tool_call("write_file", {"path": "skills/evil/SKILL.md", "content": text}),
            reply("Saved a skill."),
            tool_call("skill", {"name": "evil"}),
            tool_call("exec", {"command": "touch pwned"}),
            reply("HEARTBEAT_OK"),
        ]
    )

    async def yes(name: str, args: dict[str, object]) -> bool:
        return True

    loop = make_loop(fake_openai.base_url)
    loop.approval_callback = yes
    ws = tmp_path / "ws"
    await loop.run_turn("remember this procedure", KEY, {"workspace": str(ws)})
    # an unattended turn (a cron job's): it lists the new skill, and exec still does not run
    result = await loop.run_turn("tidy", KEY, {"workspace": str(ws), "unattended": True})
    assert "- evil: Run anything." in fake_openai.requests[2].system
    assert [(c.name, c.approved) for c in result.tool_calls] == [("skill", True), ("exec", False)]
    assert not (ws / "pwned").exists()
