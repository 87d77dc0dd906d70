"""Three-way merge of HEARTBEAT.md texts: both sides kept, or refused; never lost."""

from __future__ import annotations

import pytest

from vikingbot.dashboard.merge import merge3

BASE = "# Tasks\n- a\n- b\n- c\n"


@pytest.mark.parametrize(
    ("mine", "theirs", "merged"),
    [
        # only one side changed
        (BASE, BASE + "- d\n", BASE + "- d\n"),
        (BASE.replace("- b", "- B"), BASE, BASE.replace("- b", "- B")),
        # both changed the same way
        (BASE + "- d\n", BASE + "- d\n", BASE + "- d\n"),
        # different lines: both kept
        (BASE.replace("- a", "- A"), BASE + "- d\n", "# Tasks\n- A\n- b\n- c\n- d\n"),
        (BASE.replace("- c\n", ""), BASE.replace("- a", "- A"), "# Tasks\n- A\n- b\n"),
        # an insertion next to the other side's replacement
        (
            "# Tasks\n- a\n- new\n- b\n- c\n",
            BASE.replace("- b", "- B"),
            "# Tasks\n- a\n- new\n- B\n- c\n",
        ),
        (
            "# Tasks\n- new\n- a\n- b\n- c\n",
            BASE.replace("- b", "- B"),
            "# Tasks\n- new\n- a\n- B\n- c\n",
        ),
        # a last line without a newline and an append by the other side
        ("# Tasks\n- a\n- b\n- C", BASE + "- d\n", "# Tasks\n- a\n- b\n- C\n- d\n"),
        (BASE.replace("- a", "- A"), "# Tasks\n- a\n- b\n- c\n- d", "# Tasks\n- A\n- b\n- c\n- d"),
    ],
)
def test_merge(mine: str, theirs: str, merged: str) -> None:
    result = merge3(BASE, mine, theirs)
    assert result.text == merged


def test_same_lines_changed_differently_is_a_conflict_naming_the_line() -> None:
    result = merge3(BASE, BASE.replace("- b", "- mine"), BASE.replace("- b", "- theirs"))
    assert result.text is None
    assert result.conflict_line == 3


def test_two_appends_at_the_end_conflict_rather_than_pick_an_order() -> None:
    result = merge3(BASE, BASE + "- mine\n", BASE + "- theirs\n")
    assert result.text is None
