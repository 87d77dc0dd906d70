"""Reading HEARTBEAT.md: entries, sections, tags, line numbers, and strict scheduled entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from vikingbot.errors import EntryError
from vikingbot.heartbeat.parser import parse_heartbeat, read_heartbeat
from vikingbot.heartbeat.types import Entry, Schedule

FILE = """\
# Heartbeat Tasks

## Active Tasks

<!-- Add your periodic tasks below this line -->
- [ ] Check my inbox <!-- deliver:slack:C0123 -->
  and answer what is urgent
  <!-- note: Anna is on holiday -->
- Water the plants
1. [x] Renew the passport
* Remind me at 10:30 about the call
Plain text is a task too

- every: 30m only-if: gitlab:mr title: Merge requests task: Check my MRs: new feedback?

## Completed

<!-- Move completed tasks here or delete them -->
- [x] Pay the rent (done 2026-01-01)
"""


def test_entries_with_line_numbers_text_and_raw() -> None:
    result = parse_heartbeat(FILE)
    assert [(e.line, e.end_line) for e in result.entries] == [
        (6, 8),
        (9, 9),
        (10, 10),
        (11, 11),
        (12, 12),
        (14, 14),
        (19, 19),
    ]
    inbox = result.entries[0]
    assert inbox.text == "Check my inbox\nand answer what is urgent"
    assert inbox.raw == (
        "- [ ] Check my inbox <!-- deliver:slack:C0123 -->",
        "  and answer what is urgent",
        "  <!-- note: Anna is on holiday -->",
    )
    assert inbox.tags == ("<!-- deliver:slack:C0123 -->", "<!-- note: Anna is on holiday -->")
    assert inbox.deliver == "slack:C0123"
    assert inbox.key == "Check my inbox and answer what is urgent"
    assert not inbox.checked and inbox.section == "active"


def test_sections_checked_and_work() -> None:
    result = parse_heartbeat(FILE)
    by_text = {e.text.split("\n")[0]: e for e in result.entries}
    assert by_text["Renew the passport"].checked
    assert not by_text["Renew the passport"].is_work
    assert by_text["Pay the rent (done 2026-01-01)"].section == "completed"
    assert not by_text["Pay the rent (done 2026-01-01)"].is_work
    assert [e.key for e in result.tasks] == [
        "Check my inbox and answer what is urgent",
        "Water the plants",
        "Remind me at 10:30 about the call",
        "Plain text is a task too",
    ]
    assert [e.key for e in result.scheduled] == ["Merge requests"]
    assert result.errors == ()
    assert not result.is_empty


def test_a_colon_in_plain_text_is_not_a_key() -> None:
    result = parse_heartbeat("- Remind me at 10:30\n- Note: the NAS is at nas.lan:5000\n")
    assert [e.scheduled for e in result.entries] == [False, False]
    assert result.errors == ()


def test_keys_need_a_word_boundary() -> None:
    result = parse_heartbeat("- Re-task: nothing\n- everyday: routine\n- subtitle: x\n")
    assert not any(e.scheduled for e in result.entries)


def test_crlf_and_bom_give_the_same_entries(tmp_path: Path) -> None:
    path = tmp_path / "HEARTBEAT.md"
    path.write_bytes(b"\xef\xbb\xbf" + FILE.replace("\n", "\r\n").encode())
    crlf = read_heartbeat(path)
    plain = parse_heartbeat(FILE)
    assert crlf.entries == plain.entries
    assert all(not line.endswith("\r") for e in crlf.entries for line in e.raw)


def test_flat_file_has_flat_entries() -> None:
    result = parse_heartbeat("- one\n- two\n## Completed\n- three\n")
    assert [(e.key, e.section) for e in result.entries] == [
        ("one", "flat"),
        ("two", "flat"),
        ("three", "completed"),
    ]
    assert [e.key for e in result.active] == ["one", "two"]


def test_structured_file_outside_active_is_other() -> None:
    text = "# Heartbeat Tasks\nintro line\n## Active Tasks\n- real\n### Sub group\n- also\n## Notes\n- nas\n"
    result = parse_heartbeat(text)
    assert [(e.key, e.section) for e in result.entries] == [
        ("intro line", "other"),
        ("real", "active"),
        ("also", "active"),
        ("nas", "other"),
    ]


def test_multi_line_comment_inside_an_entry_is_one_tag() -> None:
    text = "- Check my inbox <!-- deliver:\nslack:C1 -->\n- Next\n"
    result = parse_heartbeat(text)
    first, second = result.entries
    assert (first.line, first.end_line) == (1, 2)
    assert first.tags == ("<!-- deliver:\nslack:C1 -->",)
    assert first.deliver == "slack:C1"
    assert first.text == "Check my inbox"
    assert second.key == "Next"


def test_comment_closed_before_text_is_not_a_tag() -> None:
    result = parse_heartbeat("<!-- old\nstuff --> Check my inbox\n")
    (entry,) = result.entries
    assert entry.text == "Check my inbox"
    assert entry.tags == ()


def test_blank_line_ends_an_entry_and_indented_lines_continue_it() -> None:
    result = parse_heartbeat("- one\n  - sub step\n\n  two\n")
    assert [e.text for e in result.entries] == ["one\n- sub step", "two"]


def test_heading_inside_comment_is_ignored() -> None:
    result = parse_heartbeat("<!--\n## Completed\n-->\n- still active\n")
    assert [e.section for e in result.entries] == ["flat"]


def test_parked_tag_is_read() -> None:
    result = parse_heartbeat("- Check my inbox <!-- parked: failed 3 times -->\n")
    assert result.entries[0].parked == "failed 3 times"
    assert result.entries[0].key == "Check my inbox"


def test_two_different_deliver_tags_are_an_error() -> None:
    result = parse_heartbeat("- Ping <!-- deliver:owner --> <!-- deliver:slack:C1 -->\n")
    assert result.active == ()
    assert "two different deliver: tags" in result.errors[0].message


def test_entry_problem_converts_to_entry_error() -> None:
    result = parse_heartbeat("- every: 1h task: x\n")
    err = result.errors[0].as_error(path="ws/HEARTBEAT.md")
    assert isinstance(err, EntryError)
    assert err.line == 1
    assert str(err).startswith("ws/HEARTBEAT.md:1: ")


# --- scheduled entries -------------------------------------------------------

VALID = [
    (
        "every: 15m only-if: gitlab:mr title: Merge requests task: Check my open MRs.",
        Schedule("every", every_s=900),
        "Merge requests",
        "Check my open MRs.",
        ("gitlab", "mr"),
    ),
    ("every: 90s title: Fast", Schedule("every", every_s=90), "Fast", None, None),
    ("every: 2h title: Two", Schedule("every", every_s=7200), "Two", None, None),
    ("every:1d title:Daily-ish", Schedule("every", every_s=86400), "Daily-ish", None, None),
    ("title: Late task: Do it every: 30M", Schedule("every", every_s=1800), "Late", "Do it", None),
    (
        "daily: 09:00 title: Morning task: Plan the day",
        Schedule("daily", daily="09:00"),
        "Morning",
        "Plan the day",
        None,
    ),
    ("daily: 7:05 title: Early", Schedule("daily", daily="07:05"), "Early", None, None),
    ("daily: 23:59 title: Late night", Schedule("daily", daily="23:59"), "Late night", None, None),
    ("daily: 00:00 title: Midnight", Schedule("daily", daily="00:00"), "Midnight", None, None),
    (
        'cron: "0 9 * * 1-5" title: Weekdays task: Stand-up notes',
        Schedule("cron", cron="0 9 * * 1-5"),
        "Weekdays",
        "Stand-up notes",
        None,
    ),
    ("cron: '*/10 * * * *' title: Ten", Schedule("cron", cron="*/10 * * * *"), "Ten", None, None),
    ("cron: 0 9 * * MON title: Monday", Schedule("cron", cron="0 9 * * MON"), "Monday", None, None),
    (
        "only-if: inbox every: 1h title: Mail",
        Schedule("every", every_s=3600),
        "Mail",
        None,
        ("inbox", None),
    ),
    (
        "every: 1h only-if: github:owner/repo#12 title: PR",
        Schedule("every", every_s=3600),
        "PR",
        None,
        ("github", "owner/repo#12"),
    ),
    (
        "every: 1h only-if: work.gitlab:a+b@c title: Dotted",
        Schedule("every", every_s=3600),
        "Dotted",
        None,
        ("work.gitlab", "a+b@c"),
    ),
    (
        "title: Ask task: Ping https://example.com:8443/health: is it up? every: 5m",
        Schedule("every", every_s=300),
        "Ask",
        "Ping https://example.com:8443/health: is it up?",
        None,
    ),
    # German aliases.
    (
        "alle: 30m titel: Posteingang aufgabe: Neue Mails prüfen",
        Schedule("every", every_s=1800),
        "Posteingang",
        "Neue Mails prüfen",
        None,
    ),
    (
        "täglich: 08:30 titel: Morgen aufgabe: Tag planen",
        Schedule("daily", daily="08:30"),
        "Morgen",
        "Tag planen",
        None,
    ),
    ("taeglich: 18:00 titel: Abend", Schedule("daily", daily="18:00"), "Abend", None, None),
    ("TÄGLICH: 06:00 TITEL: Laut", Schedule("daily", daily="06:00"), "Laut", None, None),
    (
        "alle: 1d nur-wenn: gitlab:issues titel: Tickets aufgabe: Tickets sichten",
        Schedule("every", every_s=86400),
        "Tickets",
        "Tickets sichten",
        ("gitlab", "issues"),
    ),
    (
        'cron: "30 7 * * 1" titel: Wochenstart',
        Schedule("cron", cron="30 7 * * 1"),
        "Wochenstart",
        None,
        None,
    ),
]


@pytest.mark.parametrize(("line", "schedule", "title", "task", "only_if"), VALID)
def test_valid_scheduled_entries(
    line: str,
    schedule: Schedule,
    title: str,
    task: str | None,
    only_if: tuple[str, str | None] | None,
) -> None:
    result = parse_heartbeat(f"## Active Tasks\n- [ ] {line}\n")
    assert result.errors == ()
    (entry,) = result.scheduled
    assert entry.schedule == schedule
    assert entry.title == title
    assert entry.key == title
    assert entry.task == task
    assert entry.only_if == only_if
    assert entry.prompt_text == (task or title)


def test_scheduled_entry_may_wrap_onto_indented_lines() -> None:
    text = "- every: 1h title: Long one task: Read the feed\n  and summarise it\n"
    (entry,) = parse_heartbeat(text).scheduled
    assert entry.task == "Read the feed\nand summarise it"


def test_scheduled_entry_keeps_its_tags() -> None:
    (entry,) = parse_heartbeat(
        "- every: 1h title: Feed <!-- deliver:telegram:42 --> task: Read it\n"
    ).scheduled
    assert entry.deliver == "telegram:42"
    assert entry.task == "Read it"


ERRORS = [
    ("every: 30m task: Check", "needs title:"),
    ("title: Inbox task: Check", "exactly one of every:"),
    ("title: Inbox every: 1h daily: 09:00", "found every:, daily:"),
    ("title: Inbox every: 1h cron: '0 * * * *'", "found every:, cron:"),
    ("title: Inbox alle: 1h täglich: 09:00", "found alle:, täglich:"),
    ("every: 1h every: 2h title: X", "every: is given twice"),
    ("every: 1h title: X titel: Y", "title: is given twice"),
    ("every: 1h title:", "title: is empty"),
    ("every: 1h title: X task:", "task: is empty"),
    ("every: 0m title: X", "duration above zero"),
    ("every: 0s title: X", "duration above zero"),
    ("every: soon title: X", "got 'soon'"),
    ("every: 30 title: X", "got '30'"),
    ("every: 1w title: X", "got '1w'"),
    ("every: -5m title: X", "got '-5m'"),
    ("every: title: X", "got ''"),
    ("daily: 24:00 title: X", "HH:MM (00:00-23:59)"),
    ("daily: 12:60 title: X", "HH:MM"),
    ("daily: 9am title: X", "HH:MM"),
    ("daily: 09:00:00 title: X", "HH:MM"),
    ("cron: 0 9 * * title: X", "needs 5 fields"),
    ('cron: "0 9 * * 1 2" title: X', "needs 5 fields"),
    ('cron: "61 9 * * *" title: X', "not a valid expression"),
    ('cron: "0 25 * * *" title: X', "not a valid expression"),
    ('cron: "0 9 31 2 *" title: X', "not a valid expression"),
    ('cron: "0 9 * * 1 title: X', "unclosed quote"),
    ("cron: @daily title: X", "needs 5 fields"),
    ("Check mail every: 1h title: X", "text before the first key"),
    ("Task: call mom", "reword it without Task:"),
    ("aufgabe: Mails prüfen", "reword it without aufgabe:"),
    ("only-if: every: 1h title: X", "only-if: must name a checker"),
    ("only-if: `curl x` every: 1h title: X", "never a command"),
    ("only-if: gh pr list every: 1h title: X", "never a command"),
    ("only-if: $(whoami) every: 1h title: X", "never a command"),
    ("only-if: a;b every: 1h title: X", "never a command"),
    ("only-if: a|b every: 1h title: X", "never a command"),
    ("only-if: /usr/bin/check every: 1h title: X", "never a command"),
    ("only-if: gitlab:mr:extra every: 1h title: X", "never a command"),
    ("only-if: gh:../../etc every: 1h title: X", "never a command"),
    ("only-if: -x every: 1h title: X", "never a command"),
    ("only-if: gh:-x every: 1h title: X", "never a command"),
    ("nur-wenn: rm -rf / alle: 1h titel: X", "nur-wenn: must name a checker"),
    # a mistyped key is told alone, with the key it most looks like (issue 16)
    ("evry: 30m title: Reviews task: Check", "evry: is not a key; did you mean every:?"),
    ("title: Reviews evry: 30m", "evry: is not a key; did you mean every:?"),
    ("dialy: 08:30 title: Brief", "dialy: is not a key; did you mean daily:?"),
    ("every: 1h titl: X", "titl: is not a key; did you mean title:?"),
    ("every: 1h title: X onlyif: gh", "onlyif: is not a key; did you mean only-if:?"),
    ("evry: 30m check the PRs", "evry: is not a key; did you mean every:?"),  # no key at all
    ("Crn: 0 9 * * * run the backup", "Crn: is not a key; did you mean cron:?"),
]


@pytest.mark.parametrize(
    "line",
    [
        "every: 1h title: X task: list my tasks: all of them",  # a task's words are its own
        "Note: buy milk",
        "Tasks: none today",  # like task:, but a plain entry's first word is only a schedule typo
        "https://example.com check it",
    ],
)
def test_words_like_keys_that_are_not_typos(line: str) -> None:
    assert parse_heartbeat(f"## Active Tasks\n- {line}\n").errors == ()


@pytest.mark.parametrize(("line", "message"), ERRORS)
def test_scheduled_entry_errors(line: str, message: str) -> None:
    text = f"## Active Tasks\n- Water the plants\n- {line}\n- Feed the cat\n"
    result = parse_heartbeat(text)
    (problem,) = result.errors
    assert problem.line == 3
    assert message in problem.message, problem.message
    assert problem.raw == f"- {line}"
    # Every other entry still runs.
    assert [e.key for e in result.active] == ["Water the plants", "Feed the cat"]
    assert not result.is_empty


def test_only_if_error_names_the_config_section() -> None:
    result = parse_heartbeat("- only-if: `ls` every: 1h title: X\n")
    assert result.errors[0].message.startswith(
        "only-if: must name a checker configured under bot.heartbeat.checkers"
    )


def test_errors_carry_their_own_line_numbers() -> None:
    text = (
        "# Heartbeat Tasks\n"  # 1
        "## Active Tasks\n"  # 2
        "- every: 1h title: Good task: fine\n"  # 3
        "- every: 1h task: no title\n"  # 4
        "  continued\n"  # 5
        "<!-- a comment\n"  # 6
        "   spanning -->\n"  # 7
        "- daily: 25:00 title: Bad time\n"  # 8
        "- plain task\n"  # 9
    )
    result = parse_heartbeat(text)
    assert [p.line for p in result.errors] == [4, 8]
    assert [e.key for e in result.active] == ["Good", "plain task"]


def test_duplicate_titles_error_on_the_later_entry() -> None:
    text = "- every: 1h title: Inbox\n- daily: 09:00 title: inbox\n- every: 2h title: Other\n"
    result = parse_heartbeat(text)
    (problem,) = result.errors
    assert problem.line == 2
    assert "already used by the entry on line 1" in problem.message
    assert [e.key for e in result.scheduled] == ["Inbox", "Other"]


def test_checked_or_completed_scheduled_entries_raise_no_errors() -> None:
    text = "- [x] every: 1h task: old\n## Completed\n- Task: call mom (done 2026-01-01)\n"
    result = parse_heartbeat(text)
    assert result.errors == ()
    assert result.is_empty


def test_title_whitespace_is_collapsed() -> None:
    (entry,) = parse_heartbeat("- every: 1h title:   Merge    requests  \n").scheduled
    assert entry.title == "Merge requests"


def test_key_of_a_plain_entry_collapses_whitespace() -> None:
    a = parse_heartbeat("- Check   my\n  inbox\n").entries[0]
    b = parse_heartbeat("* [ ] Check my inbox <!-- deliver:owner -->\n").entries[0]
    assert a.key == b.key == "Check my inbox"


def test_schedule_describe() -> None:
    assert Schedule("every", every_s=5400).describe() == "every 90m"
    assert Schedule("every", every_s=90).describe() == "every 90s"
    assert Schedule("daily", daily="09:00").describe() == "daily at 09:00"
    assert Schedule("cron", cron="0 9 * * 1").describe() == "cron 0 9 * * 1"


def test_parse_results_are_shared_for_identical_text() -> None:
    a = parse_heartbeat(FILE)
    b = parse_heartbeat(str(FILE))
    assert a == b
    assert isinstance(a.entries[0], Entry)


# --- reading files again -----------------------------------------------------


def test_a_quick_same_size_rewrite_is_never_missed(tmp_path: Path) -> None:
    path = tmp_path / "HEARTBEAT.md"
    path.write_text("- water the plants\n")
    assert [e.key for e in read_heartbeat(path).tasks] == ["water the plants"]
    from vikingbot.heartbeat import parser

    assert str(path) not in parser._FILE_CACHE  # too fresh to be trusted
    path.write_text("- call the dentist\n")  # same size, same inode, same second
    assert [e.key for e in read_heartbeat(path).tasks] == ["call the dentist"]


def test_an_unchanged_settled_file_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vikingbot.heartbeat import parser

    monkeypatch.setattr(parser, "_SETTLED_NS", 0)  # treat every file as settled
    path = tmp_path / "HEARTBEAT.md"
    path.write_text("- water the plants\n")
    first = read_heartbeat(path)
    assert parser._FILE_CACHE[str(path)][2] is first  # remembered, so not opened again
    assert read_heartbeat(path) is first
    path.write_text("- water the plants and the garden\n")
    assert [e.key for e in read_heartbeat(path).tasks] == ["water the plants and the garden"]
    path.unlink()
    assert read_heartbeat(path).missing
