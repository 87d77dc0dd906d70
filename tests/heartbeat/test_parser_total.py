"""Bad values are problems on their line, never exceptions; worst-case files parse in linear time."""

from __future__ import annotations

import time

import pytest

from vikingbot.heartbeat.parser import parse_heartbeat

FULL = 256 * 1024 - 64


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("- every: 9999999d title: Far", "at most 366d"),
        ("- every: 999999999d title: Far", "at most 366d"),
        ("- TİTLE: Posta every: 1h", "TİTLE: is not a key; did you mean title:?"),
        ("- title: Posta every: ٣h", "needs a duration"),
        ("- title: Posta täglich: ٠٩:٣٠", "needs a time of day"),
        ("- title: Posta cron: '٣ * * * *'", "never holds"),
        ("- title: Posta cron: '0 0 31 2 *'", "cron:"),
        ("- Tİtle: x EVERY: 1h", "Tİtle: is not a key; did you mean title:?"),
    ],
)
def test_bad_value_is_a_problem_on_its_line_and_the_rest_still_runs(line: str, says: str) -> None:
    text = f"## Active Tasks\n- Water the plants\n{line}\n- title: Backup every: 1d\n"
    result = parse_heartbeat(text)
    (problem,) = result.errors
    assert problem.line == 3 and says in problem.message, problem.message
    assert [e.key for e in result.active] == ["Water the plants", "Backup"]


def test_a_year_is_the_longest_interval() -> None:
    (entry,) = parse_heartbeat("- title: Yearly every: 366d\n").entries
    assert entry.error is None and entry.schedule is not None
    assert entry.schedule.every_s == 366 * 86400


def test_upper_case_keys_still_work() -> None:
    (entry,) = parse_heartbeat("- TITLE: Posta EVERY: 1h\n").entries
    assert entry.error is None and entry.title == "Posta"


WORST = {
    "heading then spaces": "# a" + " " * FULL + "b",
    "comment openers": "- x <!--" * (FULL // 8),
    "comment openers on lines": "- x\n  <!--" * (FULL // 10),
    "deliver tag with spaces": "- x <!-- deliver: a" + " " * FULL + "b -->",
    "parked tag with spaces": "- x <!-- parked: a" + " " * FULL + "b -->",
    "separator then letter": "- " * (FULL // 2) + "x",
    "key then spaces": "- every:" + " " * FULL + "x",
    "colons": "- title:" + ":" * FULL,
    "repeated keys": "- title: a every: " * (FULL // 18),
    "repeated typos": "- title: a evry: " * (FULL // 17),
    "repeated unknown words": "- title: a foo: " * (FULL // 16),
    "cron list": "- title: a cron: '" + "1," * (FULL // 2) + "1 * * * *'",
    "unclosed comment": "<!--" + "\n- a" * (FULL // 4),
    "closers": "- a " + "-->" * (FULL // 3),
    "one long word": "- " + "a" * FULL + ":",
}


@pytest.mark.parametrize("name", sorted(WORST))
def test_worst_patterns_at_full_size_parse_fast(name: str) -> None:
    text = WORST[name]
    assert 250 * 1024 < len(text.encode()) <= 256 * 1024
    # CPU time of this process, not wall time: the work the parser does, which a
    # busy machine's scheduler does not stretch (each pattern takes ~0.05 s here;
    # a backtracking pattern took seconds to minutes).
    start = time.process_time()
    parse_heartbeat(text)
    assert time.process_time() - start < 1.0
