"""Starter skills: copied on first start, never overwritten, a deleted one never back."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.skills.discover import catalog
from vikingbot.skills.starters import install, starter_names, starters_dir


def test_first_start_copies_the_starters_and_they_load(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    assert install(skills) == starter_names()
    found = catalog(user=skills)
    assert found.problems == ()
    assert "heartbeat-tasks" in found.names and "write-a-skill" in found.names


def test_a_users_edit_stays_and_a_deleted_starter_does_not_come_back(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    install(skills)
    mine = skills / "heartbeat-tasks" / "SKILL.md"
    mine.write_text("---\nname: heartbeat-tasks\ndescription: My own version.\n---\n")
    shutil.rmtree(skills / "write-a-skill")
    assert install(skills) == []
    assert "My own version." in mine.read_text()
    assert not (skills / "write-a-skill").exists()


def test_a_folder_the_user_already_has_is_never_overwritten(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    (skills / "write-a-skill").mkdir(parents=True)
    (skills / "write-a-skill" / "SKILL.md").write_text("mine")
    assert "write-a-skill" not in install(skills)
    assert (skills / "write-a-skill" / "SKILL.md").read_text() == "mine"


def test_the_heartbeat_starters_examples_are_valid_entries() -> None:
    text = (starters_dir() / "heartbeat-tasks" / "SKILL.md").read_text(encoding="utf-8")
    examples = [m for m in re.findall(r"^- (?:daily|every|cron): .*$", text, re.M)]
    assert len(examples) == 3
    result = parse_heartbeat("## Active Tasks\n" + "\n".join(examples) + "\n")
    assert result.errors == ()
    assert len(result.scheduled) == 3
