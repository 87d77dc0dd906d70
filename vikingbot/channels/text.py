"""Splitting long replies to a platform's message limit (pure).

Break points, best first: a paragraph break, a line break, a space; a hard cut
only when a piece has none. A break inside a fenced code block is avoided when a
break outside it exists; when a code block alone is longer than the limit it is
closed at the end of one piece and reopened (same fence line) in the next, so
each piece still renders as code.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^[ \t]{0,3}(```+|~~~+)")


def _fences(text: str) -> list[tuple[int, int, str]]:
    """(start, end, opening line) of each fenced block; an unclosed block runs to the end."""
    blocks: list[tuple[int, int, str]] = []
    pos = 0
    open_at: int | None = None
    open_line = ""
    marker = ""
    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line)
        if m:
            if open_at is None:
                open_at, open_line, marker = pos, line.rstrip("\r\n"), m.group(1)
            elif m.group(1)[0] == marker[0] and len(m.group(1)) >= len(marker):
                blocks.append((open_at, pos + len(line.rstrip("\r\n")), open_line))
                open_at = None
        pos += len(line)
    if open_at is not None:
        blocks.append((open_at, len(text), open_line))
    return blocks


def _inside(pos: int, blocks: list[tuple[int, int, str]]) -> tuple[int, int, str] | None:
    for block in blocks:
        if block[0] < pos < block[1]:
            return block
    return None


def _last_break(
    text: str, limit: int, sep: str, blocks: list[tuple[int, int, str]], floor: int
) -> int:
    """Last index ``i`` with ``text[i:].startswith(sep)``, floor <= i <= limit, outside code."""
    i = text.rfind(sep, 0, limit + 1)
    while i >= floor and i > 0:
        if _inside(i, blocks) is None:
            return i
        i = text.rfind(sep, 0, i)
    return -1


def _cut(text: str, limit: int) -> tuple[str, str]:
    """One piece of at most ``limit`` characters, and the rest."""
    blocks = _fences(text)
    for floor in (limit // 4, 1):
        for sep in ("\n\n", "\n", " "):
            i = _last_break(text, limit, sep, blocks, floor)
            if i > 0:
                return text[:i].rstrip(), text[i:].lstrip(sep[0])
    # No break outside code: split inside the code block that holds the limit.
    block = _inside(limit, blocks)
    if block is not None:
        start, _, opener = block
        room = limit - len(_closing(opener)) - 1
        i = text.rfind("\n", start + len(opener) + 1, room + 1)
        if i > 0 and len(opener) + 1 < limit // 2:
            head = text[:i].rstrip("\n") + "\n" + _closing(opener)
            return head, opener + "\n" + text[i + 1 :]
    return text[:limit], text[limit:]


def _closing(opener: str) -> str:
    m = _FENCE.match(opener)
    return m.group(1) if m else "```"


def split_text(text: str, limit: int | None) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters (``None``: no limit).

    Empty or whitespace-only text gives no pieces. Pieces carry no leading or
    trailing blank lines.
    """
    if limit is not None and limit < 16:
        raise ValueError(f"message limit must be at least 16 characters, got {limit}")
    rest = text.strip("\n")
    if not rest.strip():
        return []
    if limit is None:
        return [rest.rstrip()]
    pieces: list[str] = []
    while len(rest) > limit:
        head, rest = _cut(rest, limit)
        if head.strip():
            pieces.append(head)
        rest = rest.lstrip("\n")
    if rest.strip():
        pieces.append(rest.rstrip())
    return pieces
