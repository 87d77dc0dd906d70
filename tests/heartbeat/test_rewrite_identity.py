"""Entries are found by identity: a look-alike that is done never takes an active entry's outcome."""

from __future__ import annotations

from datetime import date

from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.rewrite import Complete, Delete, apply_moves_to_text

DAY = date(2026, 1, 5)


def test_checked_look_alike_above_does_not_take_the_completion() -> None:
    text = "- [x] Water the plants\n- Water the plants\n"
    new, report = apply_moves_to_text(text, [Complete("Water the plants", DAY)])
    assert report.changed and report.applied
    assert parse_heartbeat(new).active == ()  # the active one moved; nothing is left to run
    assert new.count("Water the plants") == 2
    assert new.startswith("- [x] Water the plants\n")


def test_look_alike_under_completed_is_never_found() -> None:
    text = (
        "## Completed\n- [x] Water the plants (done 2026-01-01)\n"
        "## Active Tasks\n- Water the plants\n"
    )
    parsed = parse_heartbeat(text)
    found = parsed.find("Water the plants")
    assert found is not None and found.section == "active" and found.line == 4


def test_duplicates_have_their_own_identity_and_move_separately() -> None:
    text = "## Active Tasks\n- Feed the cat\n- Feed the cat\n- Feed the cat <!-- deliver: x -->\n"
    parsed = parse_heartbeat(text)
    assert [e.ident for e in parsed.active] == [
        "Feed the cat",
        "Feed the cat #2",
        "Feed the cat #3",
    ]
    new, report = apply_moves_to_text(text, [Delete("Feed the cat #3")])
    assert report.applied and "deliver: x" not in new
    assert [e.ident for e in parse_heartbeat(new).active] == ["Feed the cat", "Feed the cat #2"]


def test_checked_entry_is_not_work_and_has_no_identity_clash() -> None:
    parsed = parse_heartbeat("- [x] Feed the cat\n- Feed the cat\n")
    assert [(e.checked, e.ident) for e in parsed.entries] == [
        (True, "Feed the cat"),
        (False, "Feed the cat"),
    ]
    assert parsed.find("Feed the cat #2") is None
