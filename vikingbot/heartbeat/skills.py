"""Entries that name a skill (``skill:``): an unknown one is a problem on its line.

The parser checks that ``skill:`` holds a skill's name; whether that skill is installed
depends on the workspace's and the user's skills folders, so the scanner asks here each time
it plans a file that names one (``with_skill_problems``); the entry then carries the error
like any malformed key: it does not run, and plan, status, the log and the owner are told.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace

from vikingbot.grammar import closest
from vikingbot.heartbeat.types import EntryProblem, ParseResult


def names_skills(parsed: ParseResult | None) -> bool:
    """Whether any work entry of the file names a skill (most files: no skill to look up)."""
    return parsed is not None and any(e.skill for e in parsed.entries if e.is_work)


def with_skill_problems(parsed: ParseResult, known: Callable[[], Collection[str]]) -> ParseResult:
    """``parsed`` with every work entry whose ``skill:`` is not in ``known()`` marked as an
    error on its line. ``known`` is called only when an entry names a skill."""
    if not names_skills(parsed):
        return parsed
    names = sorted(known(), key=str.casefold)
    folded = {n.casefold() for n in names}
    entries = list(parsed.entries)
    errors = list(parsed.errors)
    for i, e in enumerate(entries):
        if not e.skill or not e.is_work or e.error or e.skill.casefold() in folded:
            continue
        message = unknown_skill(e.skill, names)
        entries[i] = replace(e, error=message)
        errors.append(EntryProblem(e.line, message, e.raw[0] if e.raw else ""))
    errors.sort(key=lambda p: p.line)
    return replace(parsed, entries=tuple(entries), errors=tuple(errors))


def unknown_skill(name: str, names: list[str]) -> str:
    hint = closest(name, names, 0.6)
    guess = f"did you mean skill: {hint}? " if hint else ""
    listed = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    return (
        f"skill: {name} is not installed (skills: {listed or 'none'}); {guess}add it with "
        "vikingbot skills add PATH, or remove skill:"
    )
