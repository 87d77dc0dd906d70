"""Rewriting HEARTBEAT.md: moves land where they should and nothing else changes."""

from __future__ import annotations

import os
import stat
from datetime import date
from pathlib import Path

import pytest
from filelock import FileLock

from vikingbot.errors import HeartbeatError
from vikingbot.fsutil import lock_path
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.rewrite import (
    Complete,
    Delete,
    Park,
    Unpark,
    add_entry,
    apply_moves,
    apply_moves_to_text,
    locked_edit,
)

DAY = date(2026, 1, 5)

FILE = """\
# Heartbeat Tasks

## Active Tasks

<!-- Add your periodic tasks below this line -->
- [ ] Check my inbox <!-- deliver:slack:C0123 -->
  and answer what is urgent
- Water the plants
- every: 1h title: Feed task: Read the feed

## Completed

<!-- Move completed tasks here or delete them -->
- [x] Pay the rent (done 2026-01-01)
"""

INBOX = "Check my inbox and answer what is urgent"


def test_no_moves_and_skipped_moves_leave_text_identical() -> None:
    for text in (FILE, FILE.replace("\n", "\r\n"), "\ufeff" + FILE.rstrip("\n"), ""):
        assert apply_moves_to_text(text, [])[0] == text
        new, report = apply_moves_to_text(text, [Delete("not there")])
        assert new == text
        assert not report.changed
        assert report.skipped[0][1].startswith("no entry with this key")


def test_complete_moves_to_completed_with_date_and_tags() -> None:
    new, report = apply_moves_to_text(FILE, [Complete(INBOX, DAY)])
    assert report.applied == (Complete(INBOX, DAY),)
    assert new == FILE.replace(
        "- [ ] Check my inbox <!-- deliver:slack:C0123 -->\n  and answer what is urgent\n", ""
    ).replace(
        "- [x] Pay the rent (done 2026-01-01)\n",
        "- [x] Pay the rent (done 2026-01-01)\n"
        "- [x] Check my inbox (done 2026-01-05) <!-- deliver:slack:C0123 -->\n"
        "  and answer what is urgent\n",
    )
    result = parse_heartbeat(new)
    assert [e.key for e in result.tasks] == ["Water the plants"]
    moved = result.entries[-1]
    assert moved.section == "completed" and moved.checked
    assert moved.tags == ("<!-- deliver:slack:C0123 -->",)


def test_complete_keeps_crlf_bom_and_missing_final_newline() -> None:
    text = "\ufeff" + FILE.replace("\n", "\r\n").rstrip("\r\n")
    new, _ = apply_moves_to_text(text, [Complete("Water the plants", DAY)])
    assert new.startswith("\ufeff# Heartbeat Tasks\r\n")
    assert "\n" not in new.replace("\r\n", "")
    assert new.endswith("- [x] Water the plants (done 2026-01-05)")
    assert "\r\n- [x] Pay the rent (done 2026-01-01)\r\n" in new


def test_complete_keeps_final_newline() -> None:
    new, _ = apply_moves_to_text(FILE, [Complete("Water the plants", DAY)])
    assert new.endswith("- [x] Water the plants (done 2026-01-05)\n")


def test_complete_creates_completed_section_when_missing() -> None:
    new, _ = apply_moves_to_text("- one\n- two\n", [Complete("one", DAY)])
    assert new == "- two\n\n## Completed\n\n- [x] one (done 2026-01-05)\n"
    new, _ = apply_moves_to_text("- one", [Complete("one", DAY)])
    assert new == "## Completed\n\n- [x] one (done 2026-01-05)"


def test_complete_into_empty_completed_section_before_another_heading() -> None:
    text = "## Active Tasks\n- one\n## Completed\n## Notes\n- keep me\n"
    new, _ = apply_moves_to_text(text, [Complete("one", DAY)])
    assert (
        new == "## Active Tasks\n## Completed\n\n- [x] one (done 2026-01-05)\n## Notes\n- keep me\n"
    )


def test_complete_numbered_and_plain_entries() -> None:
    new, _ = apply_moves_to_text("3. Call Bob\nPlain task\n", [Complete("Call Bob", DAY)])
    assert new.splitlines()[0] == "Plain task"
    assert new.endswith("- [x] Call Bob (done 2026-01-05)\n")
    new, _ = apply_moves_to_text("Plain task\n", [Complete("Plain task", DAY)])
    assert new.endswith("- [x] Plain task (done 2026-01-05)\n")


def test_complete_entry_whose_tag_spans_lines() -> None:
    text = "- Ping Anna <!-- deliver:\nslack:C1 -->\n- other\n"
    new, _ = apply_moves_to_text(text, [Complete("Ping Anna", DAY)])
    assert new == (
        "- other\n\n## Completed\n\n- [x] Ping Anna <!-- deliver:\nslack:C1 --> (done 2026-01-05)\n"
    )
    moved = parse_heartbeat(new).entries[-1]
    assert moved.tags == ("<!-- deliver:\nslack:C1 -->",)


def test_delete_removes_only_the_entry() -> None:
    new, _ = apply_moves_to_text(FILE, [Delete(INBOX)])
    assert new == FILE.replace(
        "- [ ] Check my inbox <!-- deliver:slack:C0123 -->\n  and answer what is urgent\n", ""
    )


def test_park_marks_the_entry_and_unpark_removes_the_mark() -> None:
    parked, _ = apply_moves_to_text(FILE, [Park("Feed", "3 failed runs -- timeout -->")])
    line = "- every: 1h title: Feed task: Read the feed <!-- parked: 3 failed runs - timeout -> -->"
    assert line in parked.splitlines()
    entry = parse_heartbeat(parked).find("Feed")
    assert entry is not None and entry.parked == "3 failed runs - timeout ->"
    # The comment ends where it should: nothing after it is swallowed.
    assert [e.key for e in parse_heartbeat(parked).entries] == [
        e.key for e in parse_heartbeat(FILE).entries
    ]
    again, report = apply_moves_to_text(parked, [Park("Feed", "other")])
    assert again == parked and report.skipped[0][1] == "already parked"
    unparked, _ = apply_moves_to_text(parked, [Unpark("Feed")])
    assert unparked == FILE
    assert apply_moves_to_text(FILE, [Unpark("Feed")])[1].skipped[0][1] == "not parked"


def test_park_reason_can_never_close_the_comment_early() -> None:
    text = "- Ping\n- Pong\n"
    for reason in ("a ---> b", "--->", "x ------> y", "ends with -", "  ", "line\nbreak -->"):
        parked, _ = apply_moves_to_text(text, [Park("Ping", reason)])
        result = parse_heartbeat(parked)
        assert [e.key for e in result.entries] == ["Ping", "Pong"], parked
        assert result.entries[0].parked


def test_park_keeps_other_tags() -> None:
    text = "- Ping <!-- deliver:owner -->\n"
    parked, _ = apply_moves_to_text(text, [Park("Ping", "failed")])
    assert parked == "- Ping <!-- deliver:owner --> <!-- parked: failed -->\n"
    assert apply_moves_to_text(parked, [Unpark("Ping")])[0] == text


def test_entry_changed_by_the_user_is_not_moved() -> None:
    edited = FILE.replace("Water the plants", "Water the plants and the garden")
    new, report = apply_moves_to_text(edited, [Complete("Water the plants", DAY)])
    assert new == edited
    assert report.skipped and not report.applied


def test_expected_lines_guard_against_a_changed_entry() -> None:
    seen = parse_heartbeat(FILE).find(INBOX)
    assert seen is not None
    edited = FILE.replace(
        "  and answer what is urgent\n", "  and answer what is urgent\n  <!-- ask Anna -->\n"
    )
    new, report = apply_moves_to_text(edited, [Delete(INBOX, expect=seen.raw)])
    assert new == edited
    assert report.skipped[0][1] == "the entry was changed since the cycle read it"
    new, report = apply_moves_to_text(FILE, [Delete(INBOX, expect=seen.raw)])
    assert report.applied and INBOX.split()[0] not in new.split("## Completed")[0]


def test_only_the_first_of_two_identical_entries_moves() -> None:
    text = "- same\n- same\n"
    new, _ = apply_moves_to_text(text, [Delete("same")])
    assert new == "- same\n"


def test_completed_entries_are_never_matched() -> None:
    new, report = apply_moves_to_text(FILE, [Delete("Pay the rent (done 2026-01-01)")])
    assert new == FILE and report.skipped


def test_entries_overlapping_an_unclosed_comment_are_left_alone() -> None:
    text = "- Ping <!-- never closed\n- hidden\n"
    new, report = apply_moves_to_text(text, [Complete("Ping", DAY)])
    assert new == text
    assert "unclosed HTML comment" in report.skipped[0][1]


def test_moves_apply_in_order() -> None:
    new, report = apply_moves_to_text(
        FILE, [Park("Feed", "x"), Unpark("Feed"), Delete("Water the plants")]
    )
    assert len(report.applied) == 3
    assert new == FILE.replace("- Water the plants\n", "")


# --- add_entry ---------------------------------------------------------------


def test_add_entry_goes_to_the_end_of_active_tasks() -> None:
    new = add_entry(FILE, "Call the dentist\nabout Friday")
    assert (
        "- every: 1h title: Feed task: Read the feed\n- Call the dentist\n  about Friday\n" in new
    )
    assert [e.key for e in parse_heartbeat(new).tasks][-1] == "Call the dentist about Friday"


def test_add_entry_to_template_flat_file_and_crlf() -> None:
    template = "## Active Tasks\n\n<!-- Add below -->\n\n## Completed\n"
    assert (
        add_entry(template, "One")
        == "## Active Tasks\n\n<!-- Add below -->\n- One\n\n## Completed\n"
    )
    assert add_entry("- a\n\n## Completed\n- [x] b\n", "c") == "- a\n- c\n\n## Completed\n- [x] b\n"
    assert add_entry("- a\r\n", "b") == "- a\r\n- b\r\n"
    assert add_entry("", "b") == "- b"
    with pytest.raises(HeartbeatError):
        add_entry("- a\n", "   ")
    with pytest.raises(HeartbeatError, match="never closes"):
        add_entry("- a\n- b\n", "Call Bob <!-- hides everything below")


# --- files, locks ------------------------------------------------------------


def test_apply_moves_on_a_file(tmp_path: Path) -> None:
    path = tmp_path / "HEARTBEAT.md"
    path.write_text(FILE)
    os.chmod(path, 0o640)
    inode = path.stat().st_ino
    report = apply_moves(path, [Complete(INBOX, DAY)])
    assert report.changed
    assert path.read_text() == apply_moves_to_text(FILE, [Complete(INBOX, DAY)])[0]
    assert path.stat().st_ino != inode  # replaced, not written in place
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert lock_path(path) == tmp_path / ".HEARTBEAT.md.lock"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".HEARTBEAT.md.lock", "HEARTBEAT.md"]


def test_apply_moves_rereads_and_keeps_a_concurrent_user_edit(tmp_path: Path) -> None:
    path = tmp_path / "HEARTBEAT.md"
    path.write_text(FILE)
    decided = parse_heartbeat(path.read_text())  # the cycle decides on this
    moves = [Complete(decided.tasks[0].key, DAY)]
    # ... meanwhile the user adds a task and rewords another one
    path.write_text(FILE.replace("- Water the plants\n", "- Water the plants twice\n- Buy milk\n"))
    apply_moves(path, moves)
    after = path.read_text()
    assert "- Water the plants twice\n- Buy milk\n" in after
    assert "- [x] Check my inbox (done 2026-01-05)" in after


def test_unchanged_file_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "HEARTBEAT.md"
    path.write_text(FILE)
    inode = path.stat().st_ino
    report = apply_moves(path, [Delete("gone")])
    assert not report.changed and path.stat().st_ino == inode


def test_missing_file_skips_every_move(tmp_path: Path) -> None:
    report = apply_moves(tmp_path / "HEARTBEAT.md", [Delete("x")])
    assert report.skipped == ((Delete("x"), "the file is missing"),)
    assert not (tmp_path / "HEARTBEAT.md").exists()


def test_non_utf8_file_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "HEARTBEAT.md"
    path.write_bytes(b"- caf\xe9\n")
    with pytest.raises(HeartbeatError, match="not valid UTF-8"):
        apply_moves(path, [Delete("x")])
    assert path.read_bytes() == b"- caf\xe9\n"


def test_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.md"
    target.write_text("- a\n")
    (tmp_path / "HEARTBEAT.md").symlink_to(target)
    with pytest.raises(HeartbeatError, match="symbolic link"):
        apply_moves(tmp_path / "HEARTBEAT.md", [Delete("a")])
    assert target.read_text() == "- a\n"


def test_lock_held_elsewhere_times_out_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "HEARTBEAT.md"
    path.write_text(FILE)
    with FileLock(str(lock_path(path))), pytest.raises(HeartbeatError, match="could not lock"):
        apply_moves(path, [Delete(INBOX)], lock_timeout=0.05)
    assert path.read_text() == FILE


def test_locked_edit_creates_and_edits(tmp_path: Path) -> None:
    path = tmp_path / "HEARTBEAT.md"
    assert locked_edit(path, lambda text: add_entry(text, "Buy milk")) == "- Buy milk"
    assert path.read_text() == "- Buy milk"
    path.write_bytes("\ufeff- a\r\n".encode())
    locked_edit(path, lambda text: add_entry(text, "b"))
    assert path.read_bytes() == "\ufeff- a\r\n- b\r\n".encode()


def test_locked_edit_returning_nothing_for_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "HEARTBEAT.md"
    assert locked_edit(path, lambda text: text) == ""
    assert not path.exists()


def test_an_unlocked_save_during_an_edit_is_not_overwritten(tmp_path: Path) -> None:
    """An editor that ignores our lock saves while we compute: we re-read and redo."""
    path = tmp_path / "HEARTBEAT.md"
    path.write_text("- a\n")
    calls: list[str] = []

    def edit(text: str) -> str:
        calls.append(text)
        if len(calls) == 1:
            path.write_text("- a\n- typed by the user\n")  # the editor's save
        return text + "- from the bot\n"

    locked_edit(path, edit)
    assert calls == ["- a\n", "- a\n- typed by the user\n"]
    assert path.read_text() == "- a\n- typed by the user\n- from the bot\n"
