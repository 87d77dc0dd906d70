"""Rewriting HEARTBEAT.md without losing a single line the user wrote.

A cycle decides *moves* (complete, delete, park, unpark an entry, found by its
``key``); ``apply_moves`` takes an OS file lock, re-reads the file, applies only
those moves to the entries it finds in the *current* text, keeps every other
line byte-for-byte (line endings, final newline, BOM, tags) and replaces the
file atomically. An entry the user removed or reworded meanwhile is left alone
and reported as skipped. ``locked_edit`` lets other writers in the bot go
through the same lock. ``apply_moves_to_text`` is the pure core.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from vikingbot import fsutil
from vikingbot.errors import HeartbeatError
from vikingbot.fsutil import BOM, edit_file
from vikingbot.heartbeat.parser import (
    ACTIVE,
    COMPLETED,
    parse_heartbeat,
    starts_section,
    strip_comments,
)
from vikingbot.heartbeat.types import ParseResult

_LEAD = re.compile(r"\s*(?:(?:[-*+]|\d{1,9}[.)])(?=\s|$))?\s*(?:\[[ xX]\](?=\s|$))?\s*")
_PARK_TAG = re.compile(r"[ \t]?<!--\s*parked:.*?-->", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Complete:
    """Move the entry to ``## Completed`` as ``- [x] <text> (done YYYY-MM-DD)``.

    ``expect``: the entry's ``raw`` lines as the cycle saw them. When given,
    the move only happens if the entry is still exactly that (a user who added
    a note or a tag to it meanwhile keeps the entry where it is).
    """

    key: str
    when: date
    expect: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    """Remove the entry's lines. ``expect`` as for ``Complete``."""

    key: str
    expect: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Park:
    """Mark the entry in place with ``<!-- parked: reason -->`` so the user sees why."""

    key: str
    reason: str


@dataclass(frozen=True, slots=True)
class Unpark:
    key: str


Move = Complete | Delete | Park | Unpark


@dataclass(frozen=True, slots=True)
class RewriteReport:
    applied: tuple[Move, ...] = ()
    skipped: tuple[tuple[Move, str], ...] = ()  # (move, why it was not applied)
    changed: bool = False


class _Doc:
    """Lines with their own endings, so untouched lines come back byte-for-byte."""

    def __init__(self, text: str) -> None:
        self.bom = text.startswith(BOM)
        if self.bom:
            text = text[1:]
        self.final_newline = text.endswith("\n")
        self.lines: list[str] = []
        self.eols: list[str] = []
        pieces = text.split("\n")
        for n, piece in enumerate(pieces):
            if n == len(pieces) - 1:
                if piece:
                    self.lines.append(piece)
                    self.eols.append("")
            elif piece.endswith("\r"):
                self.lines.append(piece[:-1])
                self.eols.append("\r\n")
            else:
                self.lines.append(piece)
                self.eols.append("\n")
        crlf = self.eols.count("\r\n")
        self.eol = "\r\n" if crlf and crlf >= self.eols.count("\n") else "\n"

    def parse(self) -> ParseResult:
        return parse_heartbeat("\n".join(self.lines))

    def insert(self, index: int, lines: Sequence[str]) -> None:
        self.lines[index:index] = lines
        self.eols[index:index] = [self.eol] * len(lines)

    def remove(self, start: int, stop: int) -> None:
        del self.lines[start:stop]
        del self.eols[start:stop]

    def text(self) -> str:
        out = [BOM] if self.bom else []
        last = len(self.lines) - 1
        for n, (line, eol) in enumerate(zip(self.lines, self.eols, strict=True)):
            eol = (eol if "\n" in eol else self.eol) if n < last or self.final_newline else ""
            out.append(line + eol)
        return "".join(out)

    def comment_open_before(self, index: int) -> bool:
        open_ = False
        for line in self.lines[:index]:
            if open_ or "<!--" in line:
                open_ = strip_comments(line, open_)[1]
        return open_

    def ends_in_comment(self, start: int, stop: int) -> list[bool]:
        """For each line in ``[start, stop)``: is a comment still open at its end?"""
        open_, out = False, []
        for line in self.lines[start:stop]:
            if open_ or "<!--" in line:
                open_ = strip_comments(line, open_)[1]
            out.append(open_)
        return out


def apply_moves_to_text(text: str, moves: Sequence[Move]) -> tuple[str, RewriteReport]:
    """Apply ``moves`` to HEARTBEAT.md text; the pure core of ``apply_moves``."""
    doc = _Doc(text)
    applied: list[Move] = []
    skipped: list[tuple[Move, str]] = []
    for move in moves:
        why = _apply(doc, move)
        if why is None:
            applied.append(move)
        else:
            skipped.append((move, why))
    new_text = doc.text() if applied else text
    report = RewriteReport(tuple(applied), tuple(skipped), changed=new_text != text)
    return new_text, report


def _apply(doc: _Doc, move: Move) -> str | None:
    """Apply one move; return why it was skipped, or ``None`` when applied."""
    entry = doc.parse().find(move.key)
    if entry is None:
        return "no entry with this key outside ## Completed (removed or changed meanwhile)"
    expect = move.expect if isinstance(move, Complete | Delete) else None
    if expect is not None and entry.raw != tuple(expect):
        return "the entry was changed since the cycle read it"
    start, stop = entry.line - 1, entry.end_line
    open_at_end = doc.ends_in_comment(start, stop)
    if doc.comment_open_before(start) or open_at_end[-1]:
        return "the entry overlaps an unclosed HTML comment; left as it is"
    if isinstance(move, Park):
        if entry.parked is not None:
            return "already parked"
        at = start if not open_at_end[0] else stop - 1
        doc.lines[at] = doc.lines[at].rstrip() + f" <!-- parked: {_clean(move.reason)} -->"
        return None
    if isinstance(move, Unpark):
        if entry.parked is None:
            return "not parked"
        for n in range(start, stop):
            doc.lines[n] = _PARK_TAG.sub("", doc.lines[n])
        return None
    block = doc.lines[start:stop]
    doc.remove(start, stop)
    if isinstance(move, Complete):
        _insert_completed(doc, _completed(block, open_at_end, move.when))
    return None


def _completed(block: list[str], open_at_end: list[bool], when: date) -> list[str]:
    """The entry's lines as a checked item with the date; tags stay as written."""
    first = _LEAD.sub("", block[0], count=1)
    out = [f"- [x] {first}", *block[1:]]
    done = f"(done {when.isoformat()})"
    head, tail = _split_trailing_comments(first)
    if head.strip() and not open_at_end[0]:
        out[0] = f"- [x] {head.rstrip()} {done}" + (f" {tail}" if tail else "")
    else:
        out[-1] = f"{out[-1].rstrip()} {done}"
    return out


def _split_trailing_comments(line: str) -> tuple[str, str]:
    """Split ``text <!-- a --> <!-- b -->`` into the text and the trailing tags."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (a := line.find("<!--", pos)) >= 0:
        b = line.find("-->", a + 4)
        spans.append((a, len(line) if b < 0 else b + 3))
        if b < 0:
            break
        pos = b + 3
    cut = len(line.rstrip())
    for a, b in reversed(spans):
        if line[b:cut].strip():
            break
        cut = a
    return line[:cut], line[cut:].strip()


def _insert_completed(doc: _Doc, item: list[str]) -> None:
    parsed = doc.parse()
    heads = [h for h in parsed.headings if starts_section(h)]
    for n, h in enumerate(heads):
        if h.name != COMPLETED:
            continue
        end = heads[n + 1].line - 1 if n + 1 < len(heads) else len(doc.lines)
        body = range(h.line, end)
        filled = [i for i in body if doc.lines[i].strip()]
        if filled and not doc.ends_in_comment(0, filled[-1] + 1)[-1]:
            doc.insert(filled[-1] + 1, item)
        else:
            doc.insert(h.line, ["", *item])
        return
    tail = [] if not doc.lines or not doc.lines[-1].strip() else [""]
    doc.insert(len(doc.lines), [*tail, "## Completed", "", *item])


def add_entry(text: str, entry_text: str) -> str:
    """Append ``- <entry_text>`` to the end of ``## Active Tasks`` (or of a flat list).

    For writers such as an "add heartbeat task" tool; call it inside
    ``locked_edit`` so it cannot race a cycle's rewrite. Further lines of
    ``entry_text`` become indented continuation lines.
    """
    new = _new_entry_lines(entry_text)
    doc = _Doc(text)
    index = _append_index(doc)
    if index and doc.ends_in_comment(0, index)[-1]:
        raise HeartbeatError(
            "HEARTBEAT.md has an HTML comment (<!--) that is never closed; "
            "close it with --> before adding entries"
        )
    doc.insert(index, new)
    return doc.text()


def _new_entry_lines(entry_text: str) -> list[str]:
    body = [line.strip() for line in entry_text.strip().split("\n") if line.strip()]
    if not body:
        raise HeartbeatError("a new HEARTBEAT.md entry needs some text")
    open_ = False
    for line in body:
        open_ = strip_comments(line, open_)[1]
    if open_:
        raise HeartbeatError(
            "a new HEARTBEAT.md entry opens an HTML comment (<!--) it never closes"
        )
    return [f"- {body[0]}"] + [f"  {line}" for line in body[1:]]


def _append_index(doc: _Doc) -> int:
    """Where a new entry goes: after the last line of Active Tasks, else before Completed."""
    heads = [h for h in doc.parse().headings if starts_section(h)]
    active = [n for n, h in enumerate(heads) if h.name == ACTIVE]
    if active:
        n = active[0]
        end = heads[n + 1].line - 1 if n + 1 < len(heads) else len(doc.lines)
        filled = [i for i in range(heads[n].line, end) if doc.lines[i].strip()]
        return filled[-1] + 1 if filled else heads[n].line
    completed = [h for h in heads if h.name == COMPLETED]
    index = completed[0].line - 1 if completed else len(doc.lines)
    while index > 0 and not doc.lines[index - 1].strip():
        index -= 1
    return index


def _clean(reason: str) -> str:
    """A reason that cannot end the HTML comment early."""
    flat = " ".join(reason.split())
    while "--" in flat:
        flat = flat.replace("--", "-")
    flat = flat[:200].strip(" -")
    return flat or "parked"


def apply_moves(path: Path, moves: Sequence[Move], *, lock_timeout: float = 10) -> RewriteReport:
    """Apply ``moves`` to the file under the lock, atomically. See the module docstring.

    A missing file skips every move. Raises ``HeartbeatError`` when the lock is
    not free within ``lock_timeout`` seconds or the file cannot be rewritten.
    """
    result: list[RewriteReport] = []

    def edit(text: str | None) -> str | None:
        if text is None:
            result[:] = [RewriteReport(skipped=tuple((m, "the file is missing") for m in moves))]
            return None
        new_text, report = apply_moves_to_text(text, moves)
        result[:] = [report]
        return new_text

    edit_file(path, edit, lock_timeout=lock_timeout, error=HeartbeatError)
    return result[0]


def locked_edit(path: Path, fn: Callable[[str], str], *, lock_timeout: float = 10) -> str:
    """``fsutil.locked_edit`` raising ``HeartbeatError``: for writers of HEARTBEAT.md."""
    return fsutil.locked_edit(path, fn, lock_timeout=lock_timeout, error=HeartbeatError)
