"""Three-way merge of HEARTBEAT.md texts, line by line (pure).

The page edited ``base``; meanwhile the file became ``theirs`` (the heartbeat
completed an entry, another process appended a line); the user saves ``mine``.
Both sides' changes are kept when they touch different lines. When they touch
the same lines differently the merge is refused and the caller shows both
versions: nothing either side wrote is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True, slots=True)
class Hunk:
    """Base lines ``[start, stop)`` replaced by ``lines`` on one side."""

    start: int
    stop: int
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MergeResult:
    text: str | None  # None: a conflict
    conflict_line: int | None = None  # 1-based line of ``base`` where both sides changed


def _hunks(base: list[str], other: list[str]) -> list[Hunk]:
    matcher = SequenceMatcher(None, base, other, autojunk=False)
    return [
        Hunk(i1, i2, tuple(other[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _clash(a: Hunk, b: Hunk) -> bool:
    if a.start == a.stop and b.start == b.stop:  # two insertions at one place
        return a.start == b.start
    if a.start == a.stop:
        return b.start < a.start < b.stop
    if b.start == b.stop:
        return a.start < b.start < a.stop
    return a.start < b.stop and b.start < a.stop


def merge3(base: str, mine: str, theirs: str) -> MergeResult:
    """Merge ``mine`` and ``theirs``, both derived from ``base``."""
    if mine == theirs or theirs == base:
        return MergeResult(mine)
    if mine == base:
        return MergeResult(theirs)
    # lines keep their endings: a last line without one differs from the same line with one
    b = base.splitlines(keepends=True)
    m = mine.splitlines(keepends=True)
    t = theirs.splitlines(keepends=True)
    ours, other = _hunks(b, m), _hunks(b, t)
    for x in ours:
        for y in other:
            if _clash(x, y) and x != y:
                return MergeResult(None, conflict_line=min(x.start, y.start) + 1)
    merged: list[str] = []
    pos = 0
    # identical hunks from both sides are applied once; insertions go before replacements
    todo = sorted(set(ours) | set(other), key=lambda h: (h.start, h.stop != h.start, h.stop))
    for h in todo:
        merged += b[pos : h.start]
        merged += h.lines
        pos = max(pos, h.stop)
    merged += b[pos:]
    # a line that lost its newline on one side must not glue onto a line the other added
    out = [line if line.endswith(("\n", "\r")) else line + "\n" for line in merged[:-1]]
    return MergeResult("".join(out + merged[-1:]))
