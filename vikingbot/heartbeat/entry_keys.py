"""The keys of a scheduled HEARTBEAT.md entry: ``title: ... every: 2h only-if: disk``.

Pure and total: every function here returns a value for any text and reports
what is wrong as a sentence in ``problems``; none raises. Every scan is linear
in the length of its input (no pattern that can backtrack over unbounded text),
because the agent itself can write HEARTBEAT.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from vikingbot.grammar import closest, duration_s, time_of_day
from vikingbot.grammar import cron_problem as cron_expression_problem
from vikingbot.heartbeat.types import Schedule, normalise_key
from vikingbot.skills.names import name_problem

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
    "skill": "skill",
    "fähigkeit": "skill",
    "faehigkeit": "skill",
    "model": "model",
    "modell": "model",
}
# Keys a plain task may carry without becoming a scheduled entry (``model: ... task: ...``).
_TASK_KEYS = frozenset({"model", "task"})
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}")
_LONGEST_KEY = max(len(k) for k in KEYS)
# Keys that make a plain line a schedule: a typo of one of these at the start of a
# plain entry (``evry: 30m ...``) is told, not run every cycle as a plain task.
_SCHEDULE_KEYS = [k for k, canon in KEYS.items() if canon in ("every", "daily", "cron", "only-if")]
_TYPO_CUTOFF = 0.8
_MAX_LOOKS = 8  # unknown "word:"s compared with the keys per entry (difflib is not free)
# A word directly followed by ':' (the word holds neither whitespace nor ':'),
# so each position of the text is looked at a bounded number of times.
_WORD_COLON = re.compile(rf"(?<!\S)([^\s:]{{1,{_LONGEST_KEY}}}):")
MAX_EVERY_S = 366 * 86400  # a year: longer intervals are a typo, and overflow date maths
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
    """The ``Entry`` fields a scheduled entry's keys give; what is wrong goes to ``problems``.

    A mistyped key (``evry:``) is told alone: what follows from it (no schedule,
    text before the first key) would only hide the one fix needed.
    """
    found = find_keys(text)
    typos: list[str] = []
    _unknown_keys(text, found, typos)
    if typos:
        fields = _fields(text, found, [])
        problems.extend(dict.fromkeys(typos))  # each typo once
        return fields
    return _fields(text, found, problems)


def _fields(text: str, found: list[_Key], problems: list[str]) -> dict[str, Any]:
    values = _values(text, found, problems)
    model = _model(values, problems)
    if set(values) == _TASK_KEYS:  # a plain task naming its model: model: and task: alone
        if not values["task"][1]:
            problems.append(f"{values['task'][0]}: is empty")
        return {"task": values["task"][1] or None, "model": model}
    title = _title(values, problems)
    schedule = _kind(values, problems)
    only_if = _only_if(values, problems)
    skill = _skill(values, problems)
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
        "skill": skill,
        "model": model,
    }


def typo_problem(text: str) -> str | None:
    """For a plain entry (no key at all): its first word looks like a mistyped schedule key
    (``evry: 30m check the PRs``), so it would run every cycle instead of on its schedule."""
    m = _WORD_COLON.match(text)
    if m is None:
        return None
    hint = closest(m.group(1), _SCHEDULE_KEYS, _TYPO_CUTOFF)
    return f"{m.group(1)}: is not a key; did you mean {hint}:?" if hint else None


@lru_cache(maxsize=1024)
def _near_key(word: str) -> str | None:
    return closest(word, list(KEYS), _TYPO_CUTOFF)


def _unknown_keys(text: str, found: list[_Key], problems: list[str]) -> None:
    """Words followed by ':' that look like a mistyped key (``evry:``), outside task:'s text."""
    task = next((k for k in found if k.canon == "task"), None)
    looked = 0
    for m in _WORD_COLON.finditer(text):
        if task is not None and m.start() >= task.end:
            break  # a task's own words may hold anything
        word = m.group(1)
        if word.lower() in KEYS:
            continue
        looked += 1
        if looked > _MAX_LOOKS:  # an entry is a few keys: past that, no more guessing
            break
        hint = _near_key(word.lower())
        if hint:
            problems.append(f"{word}: is not a key; did you mean {hint}:?")


def _values(text: str, found: list[_Key], problems: list[str]) -> dict[str, tuple[str, str]]:
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
    seconds = duration_s(value) or 0.0
    if seconds <= 0:
        problems.append(
            f"{word}: needs a duration above zero like 90s, 30m, 2h or 1d, got {short(value)!r}"
        )
        return None
    if seconds > MAX_EVERY_S:
        problems.append(f"{word}: is at most 366d (a year), got {short(value)!r}")
        return None
    return Schedule(kind="every", every_s=seconds)


def _daily(word: str, value: str, problems: list[str]) -> Schedule | None:
    found = time_of_day(value)
    if found is None:
        problems.append(f"{word}: needs a time of day HH:MM (00:00-23:59), got {short(value)!r}")
        return None
    return Schedule(kind="daily", daily=f"{found[0]:02d}:{found[1]:02d}")


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


def cron_problem(expr: str) -> str | None:
    """Why a ``cron:`` value is not usable (the one cron grammar, ``vikingbot.grammar``)."""
    reason = cron_expression_problem(expr)
    if reason is None:
        return None
    if reason.startswith("needs 5 fields"):
        reason += ', quoted when it has spaces, e.g. cron: "0 9 * * 1-5"'
    return f"cron: {short(expr)!r} {reason}"


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


def _model(values: dict[str, tuple[str, str]], problems: list[str]) -> str | None:
    """A ``model:`` value is the model's name as the provider knows it (one word); no
    model list exists offline to check it against."""
    if "model" not in values:
        return None
    word, value = values["model"]
    if _MODEL.fullmatch(value) is None:
        problems.append(
            f"{word}: needs a model name in one word (e.g. gpt-4o-mini), got {short(value)!r}"
        )
        return None
    return value


def _skill(values: dict[str, tuple[str, str]], problems: list[str]) -> str | None:
    """A ``skill:`` value is one skill's name; whether it is installed is checked against the
    workspace's skills when the file is planned (``heartbeat.skills``), not here."""
    if "skill" not in values:
        return None
    word, value = values["skill"]
    why = name_problem(value, word) if value else f"{word}: is empty"
    if why:
        problems.append(why)
        return None
    return value


def short(text: str, limit: int = 60) -> str:
    """At most ``limit`` characters of ``text`` on one line, for a problem message."""
    flat = " ".join(text[: limit * 4].split())
    return flat if len(flat) <= limit and len(text) <= limit * 4 else flat[: limit - 1] + "…"
