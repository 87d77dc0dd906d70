"""HEARTBEAT.md entries that name a skill: its text is in the turn's prompt from the start,
plan shows it, and an unknown skill is a problem on its line."""

from __future__ import annotations

from pathlib import Path

from vikingbot.gateway.ops import heartbeat_plan
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.testing.fake_openai import reply

from .conftest import Harness, with_tasks

ENTRY = "- every: 1h title: Report {key}: {name} task: Write this week's report."


def install_skill(harness: Harness, name: str, where: Path | None = None) -> None:
    root = where if where is not None else harness.rt.paths.home / "skills"
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: The weekly report.\n---\n1. Read notes/.\n2. Send it.\n"
    )
    (folder / "template.md").write_text("## Done\n")


def test_the_key_in_english_and_german() -> None:
    for key in ("skill", "fähigkeit", "faehigkeit", "Skill"):
        parsed = parse_heartbeat(with_tasks(ENTRY.format(key=key, name="weekly-report")))
        (entry,) = parsed.scheduled
        assert entry.skill == "weekly-report" and entry.task == "Write this week's report."
    bad = parse_heartbeat(with_tasks(ENTRY.format(key="skill", name="../etc")))
    assert bad.errors[0].message.startswith("skill: '../etc' holds path characters")


async def test_the_skill_travels_in_the_prompt_and_plan_shows_it(harness: Harness) -> None:
    install_skill(harness, "weekly-report")
    harness.user_session()
    harness.write(with_tasks(ENTRY.format(key="skill", name="weekly-report")))
    plan = heartbeat_plan(harness.hb, None)
    (row,) = [d for d in plan["decisions"] if d["entry"] == "Report"]
    assert row["detail"] == "every 1h; skill weekly-report"
    assert plan["problems"] == []

    await harness.cycle()  # a new scheduled entry first runs one interval after it was seen
    harness.fake.script([reply("HEARTBEAT_OK")])
    harness.clock.advance(hours=2)
    await harness.cycle()

    assert harness.model_calls() == 1
    prompt = harness.fake.requests[0].last_user_text
    assert "Skill weekly-report (user skill; follow it for this task):" in prompt
    assert "1. Read notes/.\n2. Send it." in prompt
    assert "- template.md" in prompt
    assert harness.sent == []  # a no-op


async def test_a_workspace_skill_wins_in_the_prompt(harness: Harness) -> None:
    install_skill(harness, "weekly-report")
    ws = harness.workspace()
    folder = ws / "skills" / "weekly-report"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: weekly-report\ndescription: Ours.\n---\nThe workspace's own steps.\n"
    )
    harness.user_session()
    harness.write(with_tasks(ENTRY.format(key="skill", name="weekly-report")))
    await harness.cycle()
    harness.fake.script([reply("HEARTBEAT_OK")])
    harness.clock.advance(hours=2)
    await harness.cycle()
    assert "The workspace's own steps." in harness.fake.requests[0].last_user_text


async def test_an_unknown_skill_is_a_line_numbered_problem_and_the_rest_runs(
    harness: Harness,
) -> None:
    install_skill(harness, "weekly-report")
    harness.user_session()
    harness.write(
        with_tasks(
            ENTRY.format(key="skill", name="weekly-reprot"),
            "- every: 1h title: Plants task: Water them",
        )
    )
    plan = heartbeat_plan(harness.hb, None)
    (problem,) = plan["problems"]
    assert problem["line"] == 6
    assert problem["error"].startswith(
        "skill: weekly-reprot is not installed (skills: weekly-report)"
    )
    assert "did you mean skill: weekly-report?" in problem["error"]

    await harness.cycle()
    harness.fake.script([reply("HEARTBEAT_OK")])
    harness.clock.advance(hours=2)
    await harness.cycle()
    assert harness.model_calls() == 1  # Plants ran; Report did not
    assert "Water them" in harness.fake.requests[0].last_user_text


async def test_installing_the_missing_skill_lets_the_entry_run_without_editing_the_file(
    harness: Harness,
) -> None:
    harness.user_session()
    harness.write(with_tasks(ENTRY.format(key="skill", name="weekly-report")))
    await harness.cycle()
    assert heartbeat_plan(harness.hb, None)["problems"]
    install_skill(harness, "weekly-report")
    harness.clock.advance(minutes=10)
    await harness.cycle()  # now a valid entry: first seen, so it runs one interval later
    assert heartbeat_plan(harness.hb, None)["problems"] == []
    assert harness.model_calls() == 0
    harness.fake.script([reply("HEARTBEAT_OK")])
    harness.clock.advance(hours=2)
    await harness.cycle()
    assert harness.model_calls() == 1
    assert "1. Read notes/." in harness.fake.requests[0].last_user_text
