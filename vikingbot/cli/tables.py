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
Widths are display widths (terminal cells, ``rich.cells``): a CJK character or
an emoji takes two cells, a combining accent none, so such rows line up; rich is
imported only when a table holds a non-ASCII text. Control characters in a value
(an escape sequence in a session key or an entry) are shown escaped (``\\x1b``),
never sent to the terminal.
Laid out here rather than by Rich's ``Table``: for the 10,000 rows of
``heartbeat plan --all`` at 80 columns Rich took about 8 s, this 0.4 s
(bench/cli_tables.py). Times: local, to the minute, or "in 3 min" / "2 h ago".
"""

from __future__ import annotations

import os
import re
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
    return "" if value is None else _visible(" ".join(str(value).split()))


# C0/C1 controls and the bidirectional overrides (which reorder what follows them)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(text: str) -> str:
    """``text`` with control characters written as escapes (tabs and newlines are the
    caller's: cells have none left, notes split and expand them first)."""
    if text.isascii() and text.isprintable():
        return text
    return _UNSAFE.sub(lambda m: ascii(m.group())[1:-1], text)


def width_of(text: str) -> int:
    """Display width of ``text`` in terminal cells (``len`` for ASCII, which is all of a
    table after ``_visible`` except what users wrote)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


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


def _widths(cols: Sequence[Col], rows: list[list[str]], width: int | None) -> list[int]:
    natural = [
        max([width_of(c.header), *(width_of(r[i]) for r in rows)]) for i, c in enumerate(cols)
    ]
    total = sum(natural) + len(GAP) * (len(cols) - 1)
    if width is None or total <= width:
        return natural
    fixed = sum(n for n, c in zip(natural, cols, strict=True) if not c.wrap)
    avail = width - fixed - len(GAP) * (len(cols) - 1)
    floors = [
        min(n, max(width_of(c.header), _MIN_TEXT)) if c.wrap else n
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
    # pad by display width: a value of n cells in len(v) characters gets w - n spaces
    parts = [
        (v.rjust if c.right else v.ljust)(w if v.isascii() else w - width_of(v) + len(v))
        for v, c, w in zip(values, cols, widths, strict=True)
    ]
    return GAP.join(parts).rstrip()


def _row_lines(row: list[str], cols: Sequence[Col], widths: Sequence[int]) -> list[str]:
    if all(width_of(v) <= w for v, w in zip(row, widths, strict=True)):
        return [_line(row, cols, widths)]
    pieces = [_wrap(v, w) for v, w in zip(row, widths, strict=True)]
    height = max(len(p) for p in pieces)
    return [
        _line([p[k] if k < len(p) else "" for p in pieces], cols, widths) for k in range(height)
    ]


def _wrap(text: str, width: int) -> list[str]:
    if width_of(text) <= width:
        return [text]
    if text.isascii():
        return textwrap.wrap(
            text, width=max(1, width), break_long_words=True, break_on_hyphens=False
        ) or [""]
    return _wrap_cells(text, max(1, width))


def _wrap_cells(text: str, width: int) -> list[str]:
    """``textwrap.wrap`` by display width: words packed at spaces, a word wider than the
    column folded between characters (an emoji sequence or an accented letter is never
    split); a character wider than the column still gets a line of its own."""
    lines: list[str] = []
    line, used = "", 0
    for word in text.split():
        size = width_of(word)
        if line and used + 1 + size <= width:
            line, used = f"{line} {word}", used + 1 + size
            continue
        if line:
            lines.append(line)
        line, used = word, size
        if size > width:
            *full, line = _fold(word, width)
            lines += full
            used = width_of(line)
    if line or not lines:
        lines.append(line)
    return lines


def _fold(word: str, width: int) -> list[str]:
    """``word`` cut into pieces of at most ``width`` cells, at grapheme boundaries."""
    from rich.cells import split_graphemes

    spans, _ = split_graphemes(word)
    pieces: list[str] = []
    start, used = 0, 0
    for begin, _end, size in spans:
        if used and used + size > width:
            pieces.append(word[start:begin])
            start, used = begin, 0
        used += size
    pieces.append(word[start:])
    return pieces


def _note_lines(note: str, width: int | None) -> list[str]:
    """A note's own lines, indented; a line longer than ``width`` wraps under itself."""
    out = []
    for para in note.expandtabs(4).splitlines() or [""]:
        line = _visible(para.rstrip())
        if width is None or width_of(line) <= width:
            out.append(NOTE_INDENT + line if line else "")
            continue
        lead = line[: len(line) - len(line.lstrip())]
        if width_of(lead) > width // 2:
            lead = ""
        for piece in _wrap(line.strip(), width - width_of(lead)):
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
