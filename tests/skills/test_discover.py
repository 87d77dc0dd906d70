"""Finding skills: both folders, the workspace winning, and every kind of bad input named."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loguru import logger

from vikingbot.skills.discover import MAX_DESCRIPTION, catalog
from vikingbot.skills.types import Catalog


def write_skill(root: Path, folder: str, description: str = "Does things.", **fields: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {"name": folder, "description": description, **fields}
    lines = "".join(f"{k}: {v}\n" for k, v in head.items())
    path.write_text(f"---\n{lines}---\n# {folder}\n\nStep one.\n", encoding="utf-8")
    return path


def problems(found: Catalog) -> dict[str, str]:
    return {p.folder.name: p.message for p in found.problems}


def test_workspace_skill_wins_and_both_folders_load(tmp_path: Path) -> None:
    user, ws = tmp_path / "home" / "skills", tmp_path / "ws"
    write_skill(user, "report", "User's report.")
    write_skill(user, "triage", "Triage the inbox.")
    write_skill(ws / "skills", "report", "This workspace's report.")
    found = catalog(workspace=ws, user=user)
    assert [(s.name, s.source, s.description) for s in found.skills] == [
        ("report", "workspace", "This workspace's report."),
        ("triage", "user", "Triage the inbox."),
    ]
    assert [s.source for s in found.shadowed] == ["user"]
    assert found.problems == ()
    assert found.get("REPORT") is found.skills[0]


def test_missing_folders_are_no_skills(tmp_path: Path) -> None:
    assert catalog(workspace=tmp_path / "nope", user=tmp_path / "none") == Catalog()


def test_each_bad_skill_is_one_problem_and_the_rest_load(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good")
    (root / "no-front-matter").mkdir()
    (root / "no-front-matter" / "SKILL.md").write_text("# Just a page\n")
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("---\nname: broken\ndescription: 'open\n---\n")
    write_skill(root, "renamed").write_text("---\nname: other\ndescription: x\n---\n")
    write_skill(root, "pathy").write_text("---\nname: ../etc\ndescription: x\n---\n")
    write_skill(root, "no-description").write_text("---\nname: no-description\n---\n")
    (root / "latin1").mkdir()
    (root / "latin1" / "SKILL.md").write_bytes(b"---\nname: latin1\ndescription: caf\xe9\n---\n")
    (root / "empty-folder").mkdir()
    write_skill(root, "Good")  # one name twice, ignoring case: the second is skipped
    outside = tmp_path / "elsewhere"
    write_skill(outside, "linked")
    (root / "linked").symlink_to(outside / "linked")
    write_skill(root, "file-link").unlink()
    (root / "file-link" / "SKILL.md").symlink_to(outside / "linked" / "SKILL.md")
    (root / "README.md").write_text("not a skill\n")
    (root / ".git").mkdir()

    found = catalog(user=root)

    assert found.names == ["Good"]  # sorted by name as bytes: "Good" comes first
    said = problems(found)
    assert said.pop("no-front-matter").startswith("no front matter")
    assert said.pop("broken").startswith("front matter line 3: a '-quoted value must close")
    assert said.pop("renamed") == "name: 'other' does not match its folder 'renamed'; rename one"
    assert "holds path characters" in said.pop("pathy")
    assert said.pop("no-description").startswith("the front matter has no description:")
    assert said.pop("latin1").startswith("SKILL.md is not valid UTF-8")
    assert said.pop("empty-folder") == "has no SKILL.md (the file name is upper case)"
    assert "another skill here is called 'good' too" in said.pop("good")
    assert "symbolic link out of the skills folder" in said.pop("linked")
    assert "SKILL.md is a symbolic link out of the skills folder" in said.pop("file-link")
    assert said == {}
    assert all(p.skipped for p in found.problems)


def test_a_link_inside_the_skills_folder_is_fine(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "real")
    (root / "alias").symlink_to(root / "real")
    found = catalog(user=root)
    assert found.names == ["real"]
    assert "does not match its folder 'alias'" in problems(found)["alias"]


def test_huge_skill_and_long_description_are_capped_not_dropped(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    big = write_skill(root, "big")
    with big.open("a") as fh:
        fh.write("x" * (10 * 1024 * 1024))
    write_skill(root, "wordy", "w" * 5000)
    found = catalog(user=root)
    assert found.names == ["big", "wordy"]
    assert len(found.get("wordy").description) == MAX_DESCRIPTION  # type: ignore[union-attr]
    said = problems(found)
    assert "only that much is read" in said["big"]
    assert said["wordy"].startswith("description: is 5000 characters")
    assert not any(p.skipped for p in found.problems)


def test_a_fifo_for_skill_md_does_not_block(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    (root / "pipe").mkdir(parents=True)
    os.mkfifo(root / "pipe" / "SKILL.md")
    write_skill(root, "fine")
    result: list[Catalog] = []
    worker = threading.Thread(target=lambda: result.append(catalog(user=root)), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert result, "discovery blocked on a FIFO"
    assert result[0].names == ["fine"]
    assert "not a regular file" in problems(result[0])["pipe"]


def test_changes_show_on_the_next_look_and_problems_are_logged_once_per_change(
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    write_skill(root, "ok")
    bad = write_skill(root, "bad")
    bad.write_text("no front matter")
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING", format="{message}")
    try:
        catalog(user=root)
        catalog(user=root)
        assert len([x for x in lines if "bad" in x]) == 1
        write_skill(root, "bad", "Fixed now.")
        assert catalog(user=root).names == ["bad", "ok"]
        (root / "ok" / "SKILL.md").write_text("---\nname: ok\ndescription: Changed.\n---\n")
        assert catalog(user=root).get("ok").description == "Changed."  # type: ignore[union-attr]
        bad.write_text("broken again")
        catalog(user=root)
        assert len([x for x in lines if "bad" in x]) == 2
    finally:
        logger.remove(sink)


@pytest.mark.parametrize("name", ["a", "weekly-report", "pdf_tools", "v1.2", "A1"])
def test_names_users_write_are_accepted(tmp_path: Path, name: str) -> None:
    write_skill(tmp_path / "skills", name)
    assert catalog(user=tmp_path / "skills").names == [name]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.binary(max_size=2000),
        st.text(max_size=600).map(lambda t: ("---\nname: any\n" + t).encode("utf-8", "replace")),
    )
)
def test_any_bytes_in_skill_md_give_a_skill_or_one_problem(tmp_path: Path, data: bytes) -> None:
    root = tmp_path / "fuzz" / "skills"
    (root / "any").mkdir(parents=True, exist_ok=True)
    (root / "any" / "SKILL.md").write_bytes(data)
    write_skill(root, "steady")
    found = catalog(user=root)
    assert found.get("steady") is not None  # the rest load
    mine = [p for p in found.problems if p.folder.name == "any"]
    assert len(mine) <= 1
    assert found.get("any") is not None or (mine and mine[0].skipped)
