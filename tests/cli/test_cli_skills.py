"""`vikingbot skills list | show | add | remove` and what `doctor` says about skills."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.cli.conftest import Cli


def make_skill(where: Path, name: str, description: str = "Write the weekly report.") -> Path:
    folder = where / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\nallowed-tools: exec\n---\n1. Do it.\n"
    )
    (folder / "template.md").write_text("## Done\n")
    return folder


def test_add_show_list_remove(cli: Cli, home: Path, tmp_path: Path) -> None:
    source = make_skill(tmp_path / "src", "weekly-report")
    added = cli("skills", "add", str(source))
    assert added.exit_code == 0, added.output
    assert (home / "skills" / "weekly-report" / "template.md").read_text() == "## Done\n"
    again = cli("skills", "add", str(source))
    assert again.exit_code == 1 and "exists already; remove it first" in again.output

    shown = json.loads(cli("skills", "show", "weekly-report", "--json").stdout)
    assert shown["body"] == "1. Do it."
    assert shown["files"] == ["template.md"]
    assert shown["fields"]["allowed-tools"] == "exec"
    plain = cli("skills", "show", "weekly-report").stdout
    assert "allowed-tools: exec  (shown, never obeyed)" in plain

    listed = json.loads(cli("skills", "list", "--json").stdout)
    assert [(s["name"], s["source"]) for s in listed["skills"]] == [("weekly-report", "user")]

    gone = cli("skills", "remove", "weekly-report")
    assert gone.exit_code == 0 and not (home / "skills" / "weekly-report").exists()
    assert cli("skills", "remove", "weekly-report").exit_code == 1
    assert cli("skills", "remove", "../config.json").exit_code == 1


def test_add_refuses_what_is_not_a_skill(cli: Cli, home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "src" / "bad"
    bad.mkdir(parents=True)
    (bad / "SKILL.md").write_text("no front matter\n")
    result = cli("skills", "add", str(bad))
    assert result.exit_code == 1 and "no front matter" in result.output
    linky = make_skill(tmp_path / "src", "linky")
    (linky / "secret").symlink_to("/etc/hostname")
    result = cli("skills", "add", str(linky))
    assert result.exit_code == 1 and "is a symbolic link" in result.output
    assert not (home / "skills" / "linky").exists()
    pipe = make_skill(tmp_path / "src", "pipey")
    os.mkfifo(pipe / "fifo")
    assert "not a regular file" in cli("skills", "add", str(pipe)).output


def test_workspace_skills_win_and_problems_are_listed(cli: Cli, home: Path, tmp_path: Path) -> None:
    make_skill(home / "skills", "weekly-report", "Mine.")
    make_skill(tmp_path / "src", "weekly-report", "The workspace's.")
    (home / "data" / "workspace" / "shared").mkdir(parents=True)
    assert (
        cli("skills", "add", str(tmp_path / "src" / "weekly-report"), "-w", "shared").exit_code == 0
    )
    (home / "skills" / "broken").mkdir()
    (home / "skills" / "broken" / "SKILL.md").write_bytes(b"\xff\xfe")
    data = json.loads(cli("skills", "list", "--json").stdout)
    assert [(s["name"], s["source"], s["description"]) for s in data["skills"]] == [
        ("weekly-report", "workspace", "The workspace's.")
    ]
    assert [s["source"] for s in data["shadowed"]] == ["user"]
    (problem,) = data["problems"]
    assert problem["folder"].endswith("skills/broken") and "not valid UTF-8" in problem["problem"]
    assert cli("skills", "list", "-w", "../x").exit_code == 2


def test_doctor_names_bad_skills_and_unknown_skill_entries(cli: Cli, home: Path) -> None:
    make_skill(home / "skills", "weekly-report")
    (home / "skills" / "renamed").mkdir()
    (home / "skills" / "renamed" / "SKILL.md").write_text("---\nname: other\ndescription: x\n---\n")
    ws = home / "data" / "workspace" / "shared"
    ws.mkdir(parents=True)
    (ws / "HEARTBEAT.md").write_text("## Active Tasks\n- every: 1h title: R skill: nope task: go\n")
    lines = cli("doctor").stdout.splitlines()
    at = lines.index("! skills            1 loaded, 1 skipped or capped:")
    assert lines[at + 1] == (
        f"  {home}/skills/renamed: name: 'other' does not match its folder 'renamed'; rename one"
    )
    assert any(
        line.startswith(f"✗ workspace shared  {ws}/HEARTBEAT.md:2: skill: nope is not installed")
        for line in lines
    )
