"""The shipped workspace template."""

from __future__ import annotations

from pathlib import Path

from vikingbot.workspace.template import fill, template_dir

# Byte for byte the template in the heartbeat spec, section 1.
SPEC_HEARTBEAT = (
    "# Heartbeat Tasks\n"
    "\n"
    "## Active Tasks\n"
    "\n"
    "<!-- Add your periodic tasks below this line -->\n"
    "\n"
    "## Completed\n"
    "\n"
    "<!-- Move completed tasks here or delete them -->\n"
)


def test_heartbeat_template_is_exactly_the_spec() -> None:
    assert (template_dir() / "HEARTBEAT.md").read_bytes() == SPEC_HEARTBEAT.encode("utf-8")


def test_template_is_found_and_complete() -> None:
    files = {p.relative_to(template_dir()).as_posix() for p in template_dir().rglob("*.md")}
    assert files == {
        "HEARTBEAT.md",
        "SOUL.md",
        "USER.md",
        "AGENTS.md",
        "TOOLS.md",
        "memory/MEMORY.md",
    }


def test_tools_md_teaches_the_heartbeat_protocol() -> None:
    text = (template_dir() / "TOOLS.md").read_text("utf-8")
    section = text.split("## Heartbeat", 1)[1]
    for needle in (
        "HEARTBEAT_OK",
        "HEARTBEAT_KEEP",
        "`message`",
        "every: 30m title:",
        "daily:",
        "cron:",
        "only-if:",
        "never a command",
        "<!-- deliver:",
    ):
        assert needle in section, needle


def test_fill_creates_missing_files_once(tmp_path: Path) -> None:
    created = fill(tmp_path)
    assert {p.relative_to(tmp_path).as_posix() for p in created} == {
        "HEARTBEAT.md",
        "SOUL.md",
        "USER.md",
        "AGENTS.md",
        "TOOLS.md",
        "memory/MEMORY.md",
    }
    assert (tmp_path / "HEARTBEAT.md").read_text("utf-8") == SPEC_HEARTBEAT
    (tmp_path / "TOOLS.md").write_text("my tools\n", "utf-8")
    assert fill(tmp_path) == []
    assert (tmp_path / "TOOLS.md").read_text("utf-8") == "my tools\n"


def test_fill_from_another_template_folder(tmp_path: Path) -> None:
    custom = tmp_path / "tpl"
    (custom / "sub").mkdir(parents=True)
    (custom / "sub" / "a.md").write_text("A\n", "utf-8")
    (custom / "__pycache__").mkdir()
    (custom / "__pycache__" / "x.pyc").write_bytes(b"\0")
    created = fill(tmp_path / "ws", custom)
    assert created == [tmp_path / "ws" / "sub" / "a.md"]


def test_template_heartbeat_counts_as_empty_for_the_heartbeat_parser() -> None:
    from vikingbot.heartbeat.parser import read_heartbeat

    result = read_heartbeat(template_dir() / "HEARTBEAT.md")
    assert result.entries == () and result.errors == ()


def test_the_examples_tools_md_teaches_are_valid_heartbeat_entries() -> None:
    from vikingbot.heartbeat.parser import parse_heartbeat

    text = (template_dir() / "TOOLS.md").read_text("utf-8")
    example = text.split("## Heartbeat", 1)[1].split("```\n")[1]
    result = parse_heartbeat(example)
    assert result.errors == ()
    assert len(result.tasks) == 1
    assert len(result.scheduled) == 5
