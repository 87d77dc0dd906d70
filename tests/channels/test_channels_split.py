"""Splitting long replies: every piece fits, nothing is lost, breaks fall where a reader expects."""

from __future__ import annotations

import pytest

from vikingbot.channels.text import split_text

FENCE = "```"


def _words(pieces: list[str]) -> list[str]:
    return " ".join(pieces).split()


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short", 20, ["short"]),
        ("", 20, []),
        ("\n\n  \n", 20, []),
        ("\n\nhello\n\n", 20, ["hello"]),
        ("exactly twenty chars", 20, ["exactly twenty chars"]),
        # paragraph break preferred over a later line break
        ("first para.\n\nsecond\nthird line", 22, ["first para.", "second\nthird line"]),
        # line break preferred over a later space
        ("line one here\nline two", 18, ["line one here", "line two"]),
        # word boundary
        ("hello world this is a test", 16, ["hello world this", "is a test"]),
        # no boundary at all: hard cut
        ("a" * 40, 16, ["a" * 16, "a" * 16, "a" * 8]),
        # a paragraph break too early is passed over for a later line break
        (
            "ab\n\n" + " ".join(["word"] * 6) + "\nend",
            30,
            ["ab\n\nword word word word word", "word\nend"],
        ),
    ],
)
def test_split_table(text: str, limit: int, expected: list[str]) -> None:
    assert split_text(text, limit) == expected


def test_no_limit_keeps_one_piece() -> None:
    text = "x" * 100_000
    assert split_text(text, None) == [text]


@pytest.mark.parametrize("limit", [16, 50, 200, 4000])
def test_every_piece_fits_and_no_word_is_lost(limit: int) -> None:
    text = "\n\n".join(
        " ".join(f"w{p}_{i}" for i in range(40 + p * 7)) + "\nlast line" for p in range(12)
    )
    pieces = split_text(text, limit)
    assert all(0 < len(p) <= limit for p in pieces)
    assert _words(pieces) == text.split()


def test_code_block_is_not_broken_when_a_break_outside_exists() -> None:
    code = FENCE + "py\nprint(1)\nprint(2)\n" + FENCE
    text = "Intro sentence.\n\n" + code + "\n\nOutro."
    pieces = split_text(text, len(code) + 5)
    assert code in pieces
    assert pieces[0] == "Intro sentence."


def test_code_block_longer_than_the_limit_is_closed_and_reopened() -> None:
    lines = [f"value_{i} = {i}" for i in range(30)]
    text = "Result:\n" + FENCE + "python\n" + "\n".join(lines) + "\n" + FENCE + "\nDone."
    pieces = split_text(text, 120)
    assert all(len(p) <= 120 for p in pieces)
    for piece in pieces:
        # every piece renders on its own: fences balanced
        assert piece.count(FENCE) % 2 == 0, piece
    inner = [p for p in pieces if p.startswith(FENCE + "python")]
    assert len(inner) >= 2
    body = "\n".join(line for p in pieces for line in p.splitlines())
    for line in lines:
        assert line in body
    assert pieces[0] == "Result:"
    assert pieces[-1].endswith("Done.")


def test_tiny_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        split_text("anything", 3)
