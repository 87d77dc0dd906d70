"""The keys of a scheduled HEARTBEAT.md entry: ``title: ... every: 2h only-if: disk``.

Pure and total: every function here returns a value for any text and reports
what is wrong as a sentence in ``problems``; none raises. Every scan is linear
in the length of its input (no pattern that can backtrack over unbounded text),
because the agent itself can write HEARTBEAT.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from cronsim import CronSim, CronSimError

from vikingbot.heartbeat.types import Schedule, normalise_key

# A key is one of these words, at the start or after whitespace, followed by ':'.
KEYS = {
    "every": "every",
    "alle": "every",
    "daily": "daily",
    "täglich": "daily",
    "taeglich": "daily",
    "cron": "cron",
    "only-if": "only-if",
    "nur-wenn": "only-if",
    "title": "title",
    "titel": "title",
    "task": "task",
    "aufgabe": "task",
}
_LONGEST_KEY = max(len(k) for k in KEYS)
# A word directly followed by ':' (the word holds neither whitespace nor ':'),
# so each position of the text is looked at a bounded number of times.
_WORD_COLON = re.compile(rf"(?<!\S)([^\s:]{{1,{_LONGEST_KEY}}}):")
_DURATION = re.compile(r"([0-9]{1,9})[ \t]*([smhdSMHD])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_EVERY_S = 366 * 86400  # a year: longer intervals are a typo, and overflow date maths
_HHMM = re.compile(r"([0-9]{1,2}):([0-9]{2})")
# The same rules the checker runner applies (docs/checkers.md): a name, then an
# optional scope; both start with a letter or digit, neither can hold a command.
_CHECKER = re.compile(
    r"([A-Za-z0-9][A-Za-z0-9_.-]{0,63})(?::([A-Za-z0-9][A-Za-z0-9_.@+/#-]{0,199}))?"
)


@dataclass(frozen=True, slots=True)
class _Key:
    start: int  # where the key word starts
    end: int  # just after its ':'
    word: str  # as written
    canon: str  # the English name


def find_keys(text: str) -> list[_Key]:
    """Every key in ``text``, in order. Matching is case-insensitive on the word as written.

    A word whose lower case is not a key (``TİTLE:`` with a dotted capital I)
    is plain text, never a crash.
    """
    found = []
    for m in _WORD_COLON.finditer(text):
        canon = KEYS.get(m.group(1).lower())
        if canon is not None:
            found.append(_Key(m.start(), m.end(), m.group(1), canon))
    return found


def has_keys(text: str) -> bool:
    """Whether ``text`` holds a key at all (stops at the first)."""
    if ":" not in text:
        return False
    return any(m.group(1).lower() in KEYS for m in _WORD_COLON.finditer(text))


def scheduled_fields(text: str, problems: list[str]) -> dict[str, Any]:
    """The ``Entry`` fields a scheduled entry's keys give; what is wrong goes to ``problems``."""
    values = _values(text, problems)
    title = _title(values, problems)
    schedule = _kind(values, problems)
    only_if = _only_if(values, problems)
    task = None
    if "task" in values:
        if values["task"][1]:
            task = values["task"][1]
        else:
            problems.append(f"{values['task'][0]}: is empty")
    return {
        "scheduled": True,
        "schedule": schedule,
        "only_if": only_if,
        "title": title,
        "task": task,
    }


def _values(text: str, problems: list[str]) -> dict[str, tuple[str, str]]:
    found = find_keys(text)
    values: dict[str, tuple[str, str]] = {}
    before = text[: found[0].start].strip()
    if before:
        problems.append(
            f"text before the first key ({short(before)!r}); "
            "a scheduled entry is only keys, put the words after task:"
        )
    for n, key in enumerate(found):
        end = found[n + 1].start if n + 1 < len(found) else len(text)
        if key.canon in values:
            twice = f"{values[key.canon][0]}: is given twice"
            if twice not in problems:
                problems.append(twice)
            continue
        values[key.canon] = (key.word, text[key.end : end].strip())
    return values


def _title(values: dict[str, tuple[str, str]], problems: list[str]) -> str | None:
    kinds = [k for k in ("every", "daily", "cron") if k in values]
    if "title" not in values and not kinds:
        used = short(", ".join(w + ":" for w, _ in values.values()))
        problems.append(
            f"this entry uses {used} so it is read as a scheduled entry, but it has no "
            "title: and no every:/daily:/cron:; add both, or reword it without "
            f"{used} to keep it a plain task"
        )
    elif "title" not in values:
        problems.append(
            "a scheduled entry needs title: (titel:), the name it has in plan, status and state"
        )
    elif not values["title"][1]:
        problems.append(f"{values['title'][0]}: is empty")
    else:
        return normalise_key(values["title"][1])
    return None


def _kind(values: dict[str, tuple[str, str]], problems: list[str]) -> Schedule | None:
    kinds = [k for k in ("every", "daily", "cron") if k in values]
    if len(kinds) > 1 or (not kinds and "title" in values):
        given = ", ".join(values[k][0] + ":" for k in kinds) or "none"
        problems.append(
            "a scheduled entry needs exactly one of every: (alle:), daily: (täglich:) "
            f"or cron:, found {given}"
        )
        return None
    if not kinds:
        return None
    word, value = values[kinds[0]]
    if kinds[0] == "every":
        return _every(word, value, problems)
    if kinds[0] == "daily":
        return _daily(word, value, problems)
    return _cron(value, problems)


def _every(word: str, value: str, problems: list[str]) -> Schedule | None:
    m = _DURATION.fullmatch(value)
    seconds = int(m.group(1)) * _UNIT_S[m.group(2).lower()] if m else 0
    if seconds <= 0:
        problems.append(
            f"{word}: needs a duration above zero like 90s, 30m, 2h or 1d, got {short(value)!r}"
        )
        return None
    if seconds > MAX_EVERY_S:
        problems.append(f"{word}: is at most 366d (a year), got {short(value)!r}")
        return None
    return Schedule(kind="every", every_s=float(seconds))


def _daily(word: str, value: str, problems: list[str]) -> Schedule | None:
    m = _HHMM.fullmatch(value)
    if not m or int(m.group(1)) > 23 or int(m.group(2)) > 59:
        problems.append(f"{word}: needs a time of day HH:MM (00:00-23:59), got {short(value)!r}")
        return None
    return Schedule(kind="daily", daily=f"{int(m.group(1)):02d}:{m.group(2)}")


def _cron(value: str, problems: list[str]) -> Schedule | None:
    expr = value
    if len(expr) >= 2 and expr[0] in "\"'" and expr[-1] == expr[0]:
        expr = expr[1:-1].strip()
    elif expr[:1] in ("'", '"'):
        problems.append(f"cron: has an unclosed quote: {short(value)!r}")
        return None
    reason = cron_problem(" ".join(expr.split()))
    if reason:
        problems.append(reason)
        return None
    return Schedule(kind="cron", cron=" ".join(expr.split()))


_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,?#LW-]{1,100}")


@lru_cache(maxsize=1024)
def cron_problem(expr: str) -> str | None:
    """Why a 5-field cron expression is not usable, or ``None`` when it is fine."""
    fields = expr.split()
    if len(fields) != 5:
        return (
            "cron: needs 5 fields (minute hour day month weekday), quoted when it has "
            f'spaces, e.g. cron: "0 9 * * 1-5"; got {len(fields)} in {short(expr)!r}'
        )
    if not all(_CRON_FIELD.fullmatch(f) for f in fields):
        return f"cron: {short(expr)!r} has characters a cron field never holds"
    try:
        next(CronSim(" ".join(fields), datetime(2000, 1, 1)))
    except CronSimError as exc:
        return f"cron: {short(expr)!r} is not a valid expression ({exc})"
    except StopIteration:
        return f"cron: {short(expr)!r} never fires"
    return None


def checker_ref(value: str) -> tuple[str, str | None] | None:
    m = _CHECKER.fullmatch(value)
    if m and ".." not in value:
        return (m.group(1), m.group(2))
    return None


def _only_if(
    values: dict[str, tuple[str, str]], problems: list[str]
) -> tuple[str, str | None] | None:
    if "only-if" not in values:
        return None
    word, value = values["only-if"]
    ref = checker_ref(value)
    if ref is None:
        problems.append(
            f"{word}: must name a checker configured under bot.heartbeat.checkers "
            f"(as name or name:scope), never a command; got {short(value)!r}"
        )
    return ref


def short(text: str, limit: int = 60) -> str:
    """At most ``limit`` characters of ``text`` on one line, for a problem message."""
    flat = " ".join(text[: limit * 4].split())
    return flat if len(flat) <= limit and len(text) <= limit * 4 else flat[: limit - 1] + "…"
