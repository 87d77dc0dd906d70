"""Saving HEARTBEAT.md from the page: the heartbeat's lock, a merge, nothing lost.

The page sends the text it loaded (``base``) and the text the user wants
(``mine``). Under the same OS lock and atomic replace as the heartbeat's own
rewrites (``heartbeat.rewrite.locked_edit``), the current file is read again:
unchanged since the page loaded → ``mine`` is written; changed → the three are
merged line by line; when both changed the same lines the save is refused and
the page shows the user's text beside the file's current text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vikingbot.dashboard.merge import merge3
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.rewrite import locked_edit

MAX_BYTES = 256 * 1024


@dataclass(frozen=True)
class SaveResult:
    status: str  # saved | merged | conflict | too-big
    text: str  # what the file holds now
    mine: str
    conflict_line: int | None = None


@dataclass(frozen=True)
class Problem:
    line: int
    message: str


def normalise(text: str) -> str:
    """Browsers send CRLF from a textarea; keep the file's own line endings instead."""
    return text.replace("\r\n", "\n")


def problems(text: str) -> list[Problem]:
    parsed = parse_heartbeat(text)
    found = [Problem(p.line, p.message) for p in parsed.errors]
    return sorted(found, key=lambda p: p.line)


def load(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except FileNotFoundError:
        return ""


def save(path: Path, base: str, mine: str) -> SaveResult:
    base, mine = normalise(base), normalise(mine)
    crlf = False
    if len(mine.encode("utf-8")) > MAX_BYTES:
        return SaveResult("too-big", load(path), mine)
    outcome: list[SaveResult] = []

    def edit(current: str) -> str:
        nonlocal crlf
        crlf = "\r\n" in current
        theirs = normalise(current)
        if theirs == base:
            outcome[:] = [SaveResult("saved", mine, mine)]
            return _endings(mine, crlf)
        merged = merge3(base, mine, theirs)
        if merged.text is None:
            outcome[:] = [SaveResult("conflict", theirs, mine, merged.conflict_line)]
            return current
        outcome[:] = [SaveResult("merged", merged.text, mine)]
        return _endings(merged.text, crlf)

    locked_edit(path, edit)
    return outcome[0]


def _endings(text: str, crlf: bool) -> str:
    return text.replace("\n", "\r\n") if crlf else text
