"""Three-way merge of HEARTBEAT.md texts: both sides kept, or refused; never lost."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(min_value=2, max_value=12),
    data=st.data(),
)
def test_edits_on_different_lines_are_all_kept(n: int, data: st.DataObject) -> None:
    """Each side rewrites its own set of lines: every rewritten line survives, every
    untouched line stays, and nothing is refused."""
    base_lines = [f"- line {i}\n" for i in range(n)]
    mine_idx = data.draw(st.sets(st.integers(0, n - 1), max_size=n))
    # the other side only touches lines at least two away from mine (no adjacent hunks)
    free = [i for i in range(n) if all(abs(i - j) > 1 for j in mine_idx)]
    theirs_idx = data.draw(st.sets(st.sampled_from(free), max_size=len(free))) if free else set()
    mine = "".join(f"- mine {i}\n" if i in mine_idx else x for i, x in enumerate(base_lines))
    theirs = "".join(f"- theirs {i}\n" if i in theirs_idx else x for i, x in enumerate(base_lines))
    result = merge3("".join(base_lines), mine, theirs)
    assert result.text is not None
    for i in range(n):
        expected = (
            f"- mine {i}\n" if i in mine_idx
            else f"- theirs {i}\n" if i in theirs_idx
            else base_lines[i]
        )  # fmt: skip
        assert result.text.splitlines(keepends=True)[i] == expected


@settings(max_examples=100, deadline=None)
@given(base=st.text(max_size=60), mine=st.text(max_size=60), theirs=st.text(max_size=60))
def test_merge_is_total_and_a_merge_keeps_each_side_s_text(
    base: str, mine: str, theirs: str
) -> None:
    result = merge3(base, mine, theirs)  # never raises
    if result.text is not None and mine == base:
        assert result.text == theirs
    if result.text is not None and theirs == base:
        assert result.text == mine
