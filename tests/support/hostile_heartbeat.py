"""Hostile HEARTBEAT.md files for fuzzing: the grammar's pieces, mixed with the odd and the huge.

``hostile_file(rnd)`` builds one file from a ``random.Random``; ``check_file``
runs it through everything a cycle does with a file (parse, plan, due maths)
and returns what broke, or ``None``. The fuzz test (a fixed budget in CI) and
``bench/fuzz_heartbeat.py`` (as many files as you like) share both, so the
bench measures exactly what the test guards.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

STARTS = ["", "- ", "* ", "+ ", "1. ", "12) ", "- [ ] ", "- [x] ", "- [X]", "  ", "\t", "  - "]
HEADINGS = ["# ", "## ", "### ", "###### ", "####### ", "#", "##"]
HEADING_NAMES = ["Active Tasks", "Completed", "ACTIVE  TASKS:", "Notes", "actİve tasks", "#"]
KEYS = [
    "every:", "alle:", "daily:", "täglich:", "taeglich:", "cron:", "only-if:", "nur-wenn:",
    "title:", "titel:", "task:", "aufgabe:", "TİTLE:", "Tİtle:", "EVERY:", "TÄGLICH:",
    "every :", "title::", "ﬁtle:", "Title:", "CRON:",
]  # fmt: skip
VALUES = [
    "1h", "0s", "9999999d", "999999999d", "90 s", "1.5h", "-1h", "٣h", "1h1m", "366d", "367d",
    "09:00", "24:00", "9:5", "٠٩:٣٠", "23:59", "7:00", '"0 9 * * 1-5"', "'*/0 * * * *'",
    '"0 0 30 2 *"', '"60 * * * *"', "'0 0 31 2 *'", "'@daily'", "'L * * * *'", "'0 0 L * *'",
    "'0 0 * * 5L'", "'0 0 1W * *'", "'0 0 * * MON#5'", "'0 0 29 2 1'", "'* * * * *'",
    "'0 0 * * 7'", "'0-59/7 */5 1,15 * MON-FRI'", "'٣ * * * *'", "'0 0 * * 8'", "\"", "'",
    "disk", "disk:/var", "rm -rf /", "../x", "a:b:c", "Water the plants", "Posta", "",
]  # fmt: skip
TAGS = [
    "<!--", "-->", "<!-- deliver: slack:C1 -->", "<!-- deliver:x -->", "<!-- parked: failed -->",
    "<!-- PARKED: -->", "<!---->", "<!-->", "<!-- note -->", "<!-- DELİVER: a -->",
]  # fmt: skip
NOISE = [
    "\u200b", "\ufeff", "\r", "\x00", "İ", "ß", "ﬁ", "🙂", "\u2028", "\x0b", "\x0c", "\x1c",
    "\x85", "\u00a0", "e\u0301", ":", "::", " ", "\t", "[", "]", "x", "1.", "---", "* * *",
]  # fmt: skip
SEPARATORS = [" ", " ", " ", "", "\t", "  "]
ZONES = ["UTC", "Europe/Berlin", "Pacific/Apia", "America/Sao_Paulo", "Australia/Lord_Howe"]


def _token(rnd: random.Random) -> str:
    pool = rnd.choice((KEYS, KEYS, VALUES, VALUES, TAGS, NOISE))
    return rnd.choice(pool)


def _line(rnd: random.Random) -> str:
    if rnd.random() < 0.12:
        return rnd.choice(HEADINGS) + rnd.choice(HEADING_NAMES)
    tokens = [_token(rnd) for _ in range(rnd.randint(0, 8))]
    body = "".join(t + rnd.choice(SEPARATORS) for t in tokens)
    return rnd.choice(STARTS) + body


def hostile_file(rnd: random.Random, *, max_lines: int = 24) -> str:
    """One file: lines of the grammar's pieces, now and then a long run of one of them."""
    lines = [_line(rnd) for _ in range(rnd.randint(0, max_lines))]
    if lines and rnd.random() < 0.05:
        at = rnd.randrange(len(lines))
        lines[at] += (_token(rnd) or " ") * rnd.randint(50, 400)
    eol = rnd.choice(("\n", "\n", "\r\n", "\r"))
    text = eol.join(lines)
    if rnd.random() < 0.1:
        text = "\ufeff" + text
    return text


Trigger = Literal["scheduled", "manual"]


def check_file(text: str, rnd: random.Random) -> str | None:
    """Parse, plan and compute due times for ``text``; what went wrong, or ``None``."""
    from vikingbot.config.schema import HeartbeatConfig
    from vikingbot.heartbeat.parser import parse_heartbeat
    from vikingbot.heartbeat.planner import WorkspaceInput, plan_workspace
    from vikingbot.heartbeat.schedule import next_due
    from vikingbot.heartbeat.state import EntryState, WorkspaceState
    from vikingbot.session.types import SessionKey, SessionMeta

    now = datetime(2026, 3, 29, 0, 30, tzinfo=UTC) + timedelta(minutes=rnd.randint(0, 10**6))
    tz = ZoneInfo(rnd.choice(ZONES))
    step = "parse"
    try:
        parsed = parse_heartbeat(text)
        step = "inspect"
        problem = _inconsistent(text, parsed)
        if problem:
            return problem
        step = "due"
        states = {}
        for e in parsed.scheduled:
            assert e.schedule is not None
            first = now - timedelta(seconds=rnd.randint(0, 10**8))
            last = None if rnd.random() < 0.3 else first + timedelta(seconds=rnd.randint(0, 10**7))
            next_due(e.schedule, first, last, tz)
            states[e.key] = EntryState("w", e.key, first_seen=first, last_fired=last)
        step = "plan"
        session = SessionMeta(
            key=SessionKey("telegram", "default", "1"),
            created_at=now - timedelta(days=3),
            updated_at=now,
            last_user_at=now - timedelta(minutes=5),
        )
        cfg = HeartbeatConfig(mode="checklist" if rnd.random() < 0.5 else "per-task")
        ws = WorkspaceInput("w", [session], parsed, WorkspaceState("w"), entries=states)
        trigger: Trigger = rnd.choice(("scheduled", "manual"))
        plan_workspace(ws, cfg=cfg, now=now, tz=tz, trigger=trigger, today=now.date().isoformat())
    except Exception as exc:  # the point of fuzzing: any exception at all is the finding
        return f"{step}: {type(exc).__name__}: {exc}"
    return None


def _inconsistent(text: str, parsed: object) -> str | None:
    """A parse result that contradicts the text (line numbers out of range, lost lines)."""
    from vikingbot.heartbeat.types import ParseResult

    assert isinstance(parsed, ParseResult)
    n = len(text.removeprefix("\ufeff").split("\n"))
    for e in parsed.entries:
        if not 1 <= e.line <= e.end_line <= n:
            return f"entry lines {e.line}-{e.end_line} outside 1-{n}"
        if len(e.raw) != e.end_line - e.line + 1:
            return f"entry on line {e.line} has {len(e.raw)} raw lines for its span"
    for p in parsed.errors:
        if not 1 <= p.line <= n or not p.message:
            return f"problem on line {p.line} of {n}: {p.message!r}"
    return None
