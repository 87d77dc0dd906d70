"""When does a HEARTBEAT.md count as empty (no model call) and when is it unreadable?"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vikingbot.heartbeat.parser import parse_heartbeat, read_heartbeat

REPO = Path(__file__).resolve().parents[2]

# The template exactly as the spec ships it (section 1).
SPEC_TEMPLATE = """# Heartbeat Tasks

## Active Tasks

<!-- Add your periodic tasks below this line -->

## Completed

<!-- Move completed tasks here or delete them -->
"""


def with_task(line: str) -> str:
    return SPEC_TEMPLATE.replace(
        "<!-- Add your periodic tasks below this line -->\n",
        f"<!-- Add your periodic tasks below this line -->\n{line}\n",
    )


EMPTY, WORK, UNREADABLE = "empty", "work", "unreadable"

CASES: list[tuple[str, bytes | str, str]] = [
    ("spec template", SPEC_TEMPLATE, EMPTY),
    ("template without final newline", SPEC_TEMPLATE.rstrip("\n"), EMPTY),
    ("template with CRLF", SPEC_TEMPLATE.replace("\n", "\r\n"), EMPTY),
    ("template with BOM", "\ufeff" + SPEC_TEMPLATE, EMPTY),
    ("template with BOM and CRLF", "\ufeff" + SPEC_TEMPLATE.replace("\n", "\r\n"), EMPTY),
    ("empty file", "", EMPTY),
    ("blank lines and whitespace", "\n   \n\t\n", EMPTY),
    ("headings of every level", "# A\n## B\n### C\n#### D\n##### E\n###### F\n", EMPTY),
    ("one-line comment", "<!-- remember to add tasks -->\n", EMPTY),
    ("two comments on one line", "<!-- a --> <!-- b -->\n", EMPTY),
    ("comment spanning lines", "<!--\n- Check mail\nWater the plants\n-->\n", EMPTY),
    ("multi-line comment in Active", with_task("<!-- ideas:\n- call Bob\n  later\n-->"), EMPTY),
    ("comment never closed", "## Active Tasks\n<!-- draft\n- Check mail\n", EMPTY),
    ("checkbox stubs", "- [ ]\n* [ ]\n- [x]\n* [x]\n+ [ ]\n", EMPTY),
    ("stubs with trailing spaces", "- [ ]   \n* [x]\t\n", EMPTY),
    ("stub in the template", with_task("- [ ]"), EMPTY),
    ("bare list markers", "-\n*\n+\n1.\n", EMPTY),
    ("separators", "---\n***\n___\n- - -\n", EMPTY),
    ("entry that is only a tag", with_task("- <!-- deliver:slack:C0123 -->"), EMPTY),
    ("checked entry in Active", with_task("- [x] Send the report"), EMPTY),
    ("upper-case checked entry", with_task("- [X] Send the report"), EMPTY),
    ("numbered checked entry", with_task("1. [x] Send the report"), EMPTY),
    ("checked multi-line entry", with_task("- [x] Send the report\n  to Anna"), EMPTY),
    ("entries under Completed", SPEC_TEMPLATE + "- [x] old task\n- another old one\n", EMPTY),
    ("flat file with only Completed", "## Completed\n- [x] done\n- not checked\n", EMPTY),
    ("structured file, note section", SPEC_TEMPLATE + "\n## Notes\n- the NAS is nas.lan\n", EMPTY),
    ("structured file, line above Active", "# Heartbeat Tasks\nhello\n## Active Tasks\n", EMPTY),
    ("indented comment alone", "   <!-- x -->\n", EMPTY),
    # Work: any real entry outside Completed.
    ("template plus a task", with_task("- [ ] Check my inbox"), WORK),
    ("task without checkbox", with_task("- Check my inbox"), WORK),
    ("numbered task", with_task("1. Check my inbox"), WORK),
    ("plus-marker task", with_task("+ Check my inbox"), WORK),
    ("plain text line", with_task("Check my inbox"), WORK),
    ("task with a tag", with_task("- Check my inbox <!-- deliver:slack:C1 -->"), WORK),
    ("comment inside a text line", "Check <!-- not this --> my inbox\n", WORK),
    ("text after a closing comment", "<!-- a\nb --> Check my inbox\n", WORK),
    ("flat list", "- Check my inbox\n", WORK),
    ("flat list above Completed", "- Check my inbox\n## Completed\n- [x] old\n", WORK),
    ("flat list below Completed", "## Completed\n- [x] old\n## Later\n- Check my inbox\n", WORK),
    ("lower-case Active heading", "## active tasks\n- Check my inbox\n", WORK),
    ("hash word is text, not a heading", with_task("#urgent call the bank"), WORK),
    ("stub continued by indented text", with_task("- [ ]\n  Check my inbox"), WORK),
    ("CRLF task", with_task("- Check my inbox").replace("\n", "\r\n"), WORK),
    ("BOM task", "\ufeff- Check my inbox\n", WORK),
    ("scheduled entry", with_task("- every: 2h title: Inbox task: Check my inbox"), WORK),
    ("a typo is not silently empty", with_task("- evry: 2h title: Inbox"), WORK),
    ("non-ASCII task", with_task("- Blumen gießen 🌱"), WORK),
    # Not guessed at.
    ("Latin-1 bytes", b"## Active Tasks\n- caf\xe9\n", UNREADABLE),
    ("UTF-16 file", "- Check my inbox\n".encode("utf-16"), UNREADABLE),
    ("binary junk", b"\x00\x01\xff\xfe garbage", UNREADABLE),
]


def _write(tmp_path: Path, content: bytes | str) -> Path:
    path = tmp_path / "HEARTBEAT.md"
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


@pytest.mark.parametrize(("name", "content", "expected"), CASES, ids=[c[0] for c in CASES])
def test_emptiness(tmp_path: Path, name: str, content: bytes | str, expected: str) -> None:
    result = read_heartbeat(_write(tmp_path, content))
    if expected == UNREADABLE:
        assert result.unreadable is not None
        assert not result.is_empty
        return
    assert result.unreadable is None
    assert result.is_empty is (expected == EMPTY), result


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 30


def test_shipped_template_is_empty() -> None:
    shipped = REPO / "workspace_template" / "HEARTBEAT.md"
    if not shipped.exists():
        pytest.skip("workspace_template/HEARTBEAT.md not written yet")
    result = read_heartbeat(shipped)
    assert result.is_empty
    assert result.entries == ()


def test_template_has_no_entries_at_all() -> None:
    result = parse_heartbeat(SPEC_TEMPLATE)
    assert result.entries == ()
    assert [h.name for h in result.headings] == ["heartbeat tasks", "active tasks", "completed"]


def test_missing_file_is_empty_and_says_so(tmp_path: Path) -> None:
    result = read_heartbeat(tmp_path / "HEARTBEAT.md")
    assert result.missing
    assert result.is_empty
    assert result.unreadable is None


def test_non_utf8_reason_names_the_byte_and_offset(tmp_path: Path) -> None:
    result = read_heartbeat(_write(tmp_path, b"- caf\xe9\n"))
    assert result.unreadable == "not valid UTF-8 (byte 0xe9 at offset 5)"


def test_oversized_file_is_unreadable_with_the_setting_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "- Check my inbox\n" * 200)  # 3,400 bytes
    result = read_heartbeat(path, max_bytes=2048)
    assert result.unreadable == (
        "file is 3400 bytes, over the limit of 2048 (bot.heartbeat.max_file_bytes)"
    )
    assert not result.is_empty
    assert result.entries == ()


def test_file_exactly_at_the_cap_is_read(tmp_path: Path) -> None:
    content = ("- Check my inbox\n" * 200)[:2048]
    path = _write(tmp_path, content)
    result = read_heartbeat(path, max_bytes=2048)
    assert result.unreadable is None
    assert not result.is_empty


def test_default_cap_is_256_kib(tmp_path: Path) -> None:
    path = _write(tmp_path, "x" * (256 * 1024 + 1))
    assert "over the limit of 262144" in (read_heartbeat(path).unreadable or "")


def test_directory_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "HEARTBEAT.md").mkdir()
    result = read_heartbeat(tmp_path / "HEARTBEAT.md")
    assert result.unreadable == "is a directory, not a file"


def test_symbolic_link_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secrets.txt"
    secret.write_text("API_KEY=abc\n")
    (tmp_path / "HEARTBEAT.md").symlink_to(secret)
    result = read_heartbeat(tmp_path / "HEARTBEAT.md")
    assert result.unreadable == "is a symbolic link; vikingbot reads only a plain file"
    assert result.entries == ()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_named_pipe_does_not_hang_and_is_unreadable(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "HEARTBEAT.md")
    result = read_heartbeat(tmp_path / "HEARTBEAT.md")
    assert result.unreadable == "is not a regular file"


def test_malformed_entry_makes_the_file_non_empty() -> None:
    result = parse_heartbeat(with_task("- every: 2h task: Check my inbox"))
    assert result.active == ()
    assert len(result.errors) == 1
    assert not result.is_empty
