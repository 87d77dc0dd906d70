"""One look for every listing the CLI prints (heartbeat, cron, sessions, channels, inbox).

A table is a title line, a header, a rule under each header, and rows whose
columns are two spaces apart. Nothing is ever cut with "…":

- a column of codes, times and numbers (``reason``, ``outcome``, ``at``) keeps
  each value whole on one line;
- a column of text (``entry``, ``session``) wraps at spaces to share what the
  terminal has left, and a word longer than its column is folded onto the next
  line, never shortened;
- a *note* (a run's detail or error, an inbox item's text) is printed under its
  row, indented, wrapped to the whole width, so long texts never squeeze the
  columns;
- a column whose value is the same in every row (one workspace) moves into the
  title.

The width is ``COLUMNS`` when set, else the terminal's; when stdout is not a
terminal (a pipe, a file) rows are never wrapped, one line each, for grep.
Laid out here rather than by Rich's ``Table``: for the 10,000 rows of
``heartbeat plan --all`` at 80 columns Rich took about 8 s, this 0.4 s
(bench/cli_tables.py). Times: local, to the minute, or "in 3 min" / "2 h ago".
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

GAP = "  "
NOTE_INDENT = "    "
_MIN_TEXT = 12  # a text column is not squeezed below this (or its header)


@dataclass(frozen=True)
class Col:
    """One column: ``wrap`` for free text; ``right`` for numbers; ``merge`` lets a column
    whose value is the same in every row move into the title (``workspace shared``)."""

    header: str
    wrap: bool = False
    right: bool = False
    merge: bool = False


Row = Sequence[str | None]


def width_now() -> int | None:
    """Columns to fit in: ``COLUMNS``, else the terminal's; None when stdout is no terminal."""
    value = os.environ.get("COLUMNS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError, AttributeError):
        pass
    return None


def print_table(
    title: str | None,
    cols: Sequence[Col],
    rows: Iterable[Row],
    *,
    notes: Sequence[str | None] | None = None,
    empty: str | None = None,
    width: int | None = None,
    err: bool = False,
) -> None:
    """Print a table to stdout (``err``: stderr); ``empty`` is printed instead of no rows."""
    text = render(title, cols, list(rows), notes=notes, empty=empty, width=width or width_now())
    stream = sys.stderr if err else sys.stdout
    stream.write(text)
    stream.flush()


def render(
    title: str | None,
    cols: Sequence[Col],
    rows: list[Row],
    *,
    notes: Sequence[str | None] | None = None,
    empty: str | None = None,
    width: int | None = None,
) -> str:
    """The table as text, every line ending in a newline."""
    if not rows:
        return f"{empty}\n" if empty else ""
    cells = [[_flat(v) for v in r] for r in rows]
    cols, cells, merged = _merge_constant(list(cols), cells)
    head = ", ".join(merged)
    full_title = f"{title} ({head})" if title and head else (title or head or None)
    widths = _widths(cols, cells, width)
    out: list[str] = [full_title] if full_title else []
    out.append(_line([c.header for c in cols], cols, widths))
    out.append(GAP.join("─" * w for w in widths))
    note_width = max(20, (width or 10**6) - len(NOTE_INDENT))
    for i, row in enumerate(cells):
        out += _row_lines(row, cols, widths)
        note = notes[i] if notes is not None and i < len(notes) else None
        if note:
            out += _note_lines(note, note_width if width else None)
    return "\n".join(out) + "\n"


def _flat(value: str | None) -> str:
    return "" if value is None else " ".join(str(value).split())


def _merge_constant(
    cols: list[Col], cells: list[list[str]]
) -> tuple[list[Col], list[list[str]], list[str]]:
    if len(cells) < 2:
        return cols, cells, []
    keep, merged = [], []
    for i, c in enumerate(cols):
        values = {r[i] for r in cells}
        if c.merge and len(values) == 1 and next(iter(values)):
            merged.append(f"{c.header} {cells[0][i]}")
        else:
            keep.append(i)
    if not merged:
        return cols, cells, []
    return [cols[i] for i in keep], [[r[i] for i in keep] for r in cells], merged


def _widths(cols: Sequence[Col], cells: list[list[str]], width: int | None) -> list[int]:
    natural = [max([len(c.header), *(len(r[i]) for r in cells)]) for i, c in enumerate(cols)]
    total = sum(natural) + len(GAP) * (len(cols) - 1)
    if width is None or total <= width:
        return natural
    fixed = sum(n for n, c in zip(natural, cols, strict=True) if not c.wrap)
    avail = width - fixed - len(GAP) * (len(cols) - 1)
    floors = [
        min(n, max(len(c.header), _MIN_TEXT)) if c.wrap else n
        for n, c in zip(natural, cols, strict=True)
    ]
    wrapped = [i for i, c in enumerate(cols) if c.wrap]
    if not wrapped:
        return natural
    # the widest text columns give way first, never below their floor
    level = max(natural[i] for i in wrapped)
    while level > 1 and sum(max(min(natural[i], level), floors[i]) for i in wrapped) > avail:
        level -= 1
    return [
        max(min(natural[i], level), floors[i]) if c.wrap else natural[i] for i, c in enumerate(cols)
    ]


def _line(values: Sequence[str], cols: Sequence[Col], widths: Sequence[int]) -> str:
    parts = [
        v.rjust(w) if c.right else v.ljust(w) for v, c, w in zip(values, cols, widths, strict=True)
    ]
    return GAP.join(parts).rstrip()


def _row_lines(row: list[str], cols: Sequence[Col], widths: Sequence[int]) -> list[str]:
    if all(len(v) <= w for v, w in zip(row, widths, strict=True)):
        return [_line(row, cols, widths)]
    pieces = [_wrap(v, w) for v, w in zip(row, widths, strict=True)]
    height = max(len(p) for p in pieces)
    return [
        _line([p[k] if k < len(p) else "" for p in pieces], cols, widths) for k in range(height)
    ]


def _wrap(text: str, width: int) -> list[str]:
    if len(text) <= width:
        return [text]
    return textwrap.wrap(
        text, width=max(1, width), break_long_words=True, break_on_hyphens=False
    ) or [""]


def _note_lines(note: str, width: int | None) -> list[str]:
    """A note's own lines, indented; a line longer than ``width`` wraps under itself."""
    out = []
    for para in note.expandtabs(4).splitlines() or [""]:
        line = para.rstrip()
        if width is None or len(line) <= width:
            out.append(NOTE_INDENT + line if line else "")
            continue
        lead = line[: len(line) - len(line.lstrip())]
        if len(lead) > width // 2:
            lead = ""
        for piece in _wrap(line.strip(), width - len(lead)):
            out.append(NOTE_INDENT + lead + piece)
    return out


# ------------------------------------------------------------------ times


def as_time(value: Any) -> datetime | None:
    """A datetime (naive = UTC) or an ISO-8601 string from the JSON, as an aware datetime."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def local(value: Any) -> str:
    """``2026-03-10 13:05`` in this machine's timezone (no seconds, no microseconds)."""
    when = as_time(value)
    if when is None:
        return "-" if value is None else str(value)
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


def ago(value: Any, now: datetime | None = None) -> str:
    """``just now``, ``40 s ago``, ``12 min ago``, ``3 h ago``, ``2 d ago``; older than a
    week (or in the future) as a local time."""
    when = as_time(value)
    if when is None:
        return "-" if value is None else str(value)
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    if seconds < -60 or seconds >= 7 * 86400:
        return local(when)
    return "just now" if seconds < 5 else f"{_span(seconds)} ago"


def until(value: Any, now: datetime | None = None) -> str:
    """``in 3 min``, ``in 2 h``, ``now`` (due or overdue); a week or more ahead as a local time."""
    if value == "now":
        return "now"
    when = as_time(value)
    if when is None:
        return "-" if value is None else str(value)
    seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds <= 0:
        return "now"
    if seconds >= 7 * 86400:
        return local(when)
    return f"in {_span(seconds)}"


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{max(1, int(seconds))} s"
