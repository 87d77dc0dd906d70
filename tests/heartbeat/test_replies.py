"""The no-op / KEEP reply protocol: what counts as "nothing to do", what keeps a task."""

from __future__ import annotations

import pytest

from vikingbot.replies import DEFAULT_ACK_MAX_CHARS, is_noop, normalise, strip_tokens, wants_keep

LONG = "Checked the inbox: " + "x" * 400

NOOP_CASES = [
    ("HEARTBEAT_OK", True),
    ("heartbeat ok", True),
    ("Heartbeat_Ok", True),
    ("HEARTBEATOK", True),
    ("HEARTBEAT OK", True),
    ("HEART BEAT_OK", True),  # normalised, spaces and underscores dropped (issue 31)
    ("heart_beat ok", True),
    ("HEARTBEAT_OK.", True),
    ("HEARTBEAT_OK!", True),
    ("HEARTBEAT_OK?!", True),
    ("  HEARTBEAT_OK  \n", True),
    ("**HEARTBEAT_OK**", True),
    ("*HEARTBEAT_OK*", True),
    ("_HEARTBEAT_OK_", True),
    ("~~HEARTBEAT_OK~~", True),
    ("`HEARTBEAT_OK`", True),
    ("```\nHEARTBEAT_OK\n```", True),
    ("", True),
    ("   \n\t ", True),
    (None, True),
    ("HEARTBEAT_OK - nothing new in the inbox.", True),
    ("Nothing needs attention. HEARTBEAT_OK", True),
    ("All quiet.\n\n**HEARTBEAT_OK**", True),
    ("HEARTBEAT_OK\nChecked mail and calendar, both empty.", True),
    # Not no-ops: real content, or the token used as ordinary text.
    ("I sent the weekly report to Anna.", False),
    (f"Done. {LONG} HEARTBEAT_OK is not what I would say here. {LONG}", False),
    (f"{LONG} and HEARTBEAT_OK appears in the middle of the text {LONG}", False),
    ("Found 3 new emails; summary sent via message tool.", False),
    ("OK", False),
    ("HEARTBEAT", False),
    ("HEARTBEAT_OKAY, I will check later", False),
    ("HEARTBEAT_KEEP", False),
    ("HEARTBEAT_OK_STATUS: 3 alerts need you", False),
    ("The heartbeat is ok but the disk is full", False),
]


@pytest.mark.parametrize(("reply", "expected"), NOOP_CASES)
def test_is_noop(reply: str | None, expected: bool) -> None:
    assert is_noop(reply) is expected


def test_there_are_enough_noop_cases() -> None:
    assert len(NOOP_CASES) >= 25


@pytest.mark.parametrize(
    ("other", "expected"),
    [(DEFAULT_ACK_MAX_CHARS - 1, True), (DEFAULT_ACK_MAX_CHARS, True), (301, False)],
)
def test_ack_max_chars_boundary_token_first(other: int, expected: bool) -> None:
    assert DEFAULT_ACK_MAX_CHARS == 300
    assert is_noop("HEARTBEAT_OK " + "a" * other) is expected


@pytest.mark.parametrize(("other", "expected"), [(300, True), (301, False)])
def test_ack_max_chars_boundary_token_last(other: int, expected: bool) -> None:
    assert is_noop("a" * other + " HEARTBEAT_OK.") is expected


def test_ack_max_chars_is_configurable() -> None:
    reply = "HEARTBEAT_OK " + "a" * 50
    assert is_noop(reply, ack_max_chars=50)
    assert not is_noop(reply, ack_max_chars=49)
    assert is_noop("HEARTBEAT_OK", ack_max_chars=0)
    assert not is_noop("HEARTBEAT_OK done", ack_max_chars=0)


def test_normalise() -> None:
    assert normalise("  **heartbeat_ok**. ") == "HEARTBEATOK"
    assert normalise("`Heartbeat Ok`!") == "HEARTBEATOK"
    assert normalise(None) == ""


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("HEARTBEAT_KEEP", True),
        ("Still waiting for Bob. heartbeat_keep", True),
        ("Halfway done\n\n**HEARTBEAT KEEP**", True),
        ("`HEARTBEAT_KEEP` - the PR is not merged yet", True),
        ("Done, the report is sent.", False),
        ("HEARTBEAT_OK", False),
        ("", False),
        (None, False),
        ("keep going", False),
    ],
)
def test_wants_keep(reply: str | None, expected: bool) -> None:
    assert wants_keep(reply) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Report sent. HEARTBEAT_OK", "Report sent."),
        ("HEARTBEAT_OK\nThe build is green.", "The build is green."),
        ("Halfway there. **HEARTBEAT_KEEP**", "Halfway there."),
        ("`HEARTBEAT_KEEP` still waiting", "still waiting"),
        ("_HEARTBEAT_OK_ all fine", "all fine"),
        ("Status: heartbeat_ok.", "Status:"),
        ("Two new mails. HEARTBEAT_KEEP\n\n\n\nMore later.", "Two new mails.\n\nMore later."),
        ("No tokens here.", "No tokens here."),
        ("HEARTBEAT_OK", ""),
    ],
)
def test_strip_tokens(text: str, expected: str) -> None:
    assert strip_tokens(text) == expected


def test_strip_tokens_leaves_words_that_merely_contain_the_token() -> None:
    assert strip_tokens("see HEARTBEAT_OKAY_FLAG in config") == "see HEARTBEAT_OKAY_FLAG in config"


# Issue 11 defect 3: markup around a token goes with it, and nothing else does.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<b>HEARTBEAT_OK</b>", ""),
        ("<code>HEARTBEAT_OK</code> all good", "all good"),
        ("**HEARTBEAT_OK**", ""),
        ("`HEARTBEAT_OK`", ""),
        ("<strong><em>HEARTBEAT_KEEP</em></strong> waiting for Bob", "waiting for Bob"),
        ('<span class="x">HEARTBEAT_OK</span>', ""),
        ("I should not respond HEARTBEAT_OK.", "I should not respond."),
        ("I should not respond **HEARTBEAT_OK**!", "I should not respond!"),
        ("HEARTBEAT_OK. Disk is at 91%.", "Disk is at 91%."),
        ("Disk is at 91%. <b>HEARTBEAT_KEEP</b>", "Disk is at 91%."),
        ("<p>Disk full HEARTBEAT_OK</p>", "<p>Disk full</p>"),  # the <p> is not the token's
        ("Keep  two  spaces HEARTBEAT_OK", "Keep  two  spaces"),
        ("line one\nHEARTBEAT_OK\nline two", "line one\nline two"),
        ("**bold** stays, HEARTBEAT_OK goes", "**bold** stays, goes"),
    ],
)
def test_strip_tokens_removes_the_markup_around_the_token_and_nothing_else(
    text: str, expected: str
) -> None:
    assert strip_tokens(text) == expected


HUNDRED_KB = "The nightly report: " + "all rows checked. " * 5700


# Issue 11 "Bad input": each case classified by the one rule, is_noop.
@pytest.mark.parametrize(
    ("reply", "noop", "delivered"),
    [
        ("<b></b>", True, "<b></b>"),  # only markup: nothing to say
        ("** __ ``", True, "** __ ``"),
        (" \n\t \u00a0", True, ""),  # only whitespace
        ("heartbeat_ok", True, ""),  # another case
        ("Heartbeat Ok", True, ""),
        ("HEARTBEAT_OK!!!", True, ""),  # punctuation
        ("HEARTBEAT_OK?", True, ""),
        ("HEARTBEAT_OK HEARTBEAT_OK", True, ""),  # twice
        ("<b>HEARTBEAT_OK</b>\n\n`HEARTBEAT_OK`", True, ""),
        (HUNDRED_KB + "HEARTBEAT_OK", False, HUNDRED_KB.strip()),  # 100 kB ending with it
        (" " * 100_000 + "HEARTBEAT_OK", True, ""),
        ("x" * 100_000 + " HEARTBEAT_OK", False, "x" * 100_000),
    ],
)
def test_bad_input_table(reply: str, noop: bool, delivered: str) -> None:
    assert is_noop(reply) is noop
    assert strip_tokens(reply) == delivered.strip()
