"""Reading HEARTBEAT.md: sections, entries, tags and the strict scheduled-entry keys.

Pure: ``parse_heartbeat(text)`` turns text into a ``ParseResult``;
``read_heartbeat(path)`` adds the few file rules (missing, size cap, UTF-8, BOM).
The rules users rely on are written out in ``docs/heartbeat-file.md``.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from cronsim import CronSim, CronSimError

from vikingbot.heartbeat.types import (
    Entry,
    EntryProblem,
    Heading,
    ParseResult,
    Schedule,
    Section,
    normalise_key,
)

DEFAULT_MAX_BYTES = 256 * 1024
BOM = "\ufeff"
ACTIVE = "active tasks"
COMPLETED = "completed"

_LIST_MARKER = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?=\s|$)")
_CHECKBOX = re.compile(r"\[([ xX])\](?=\s|$)")
_HEADING = re.compile(r"(#{1,6})(?:\s+(.*?))?\s*$")
_SEPARATOR = re.compile(r"(?:([-*_=])[ \t]*)(?:\1[ \t]*){2,}")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_DELIVER = re.compile(r"<!--\s*deliver:\s*(.*?)\s*-->", re.DOTALL | re.IGNORECASE)
_PARKED = re.compile(r"<!--\s*parked:\s*(.*?)\s*-->", re.DOTALL | re.IGNORECASE)

# A key is one of these words, at the start or after whitespace, followed by ':'.
_KEYS = {
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
_KEY = re.compile(r"(?<!\S)(" + "|".join(sorted(_KEYS, key=len, reverse=True)) + r"):", re.I)
_DURATION = re.compile(r"(\d{1,9})\s*([smhd])", re.I)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_HHMM = re.compile(r"(\d{1,2}):(\d{2})")
# The same rules the checker runner applies (docs/checkers.md): a name, then an
# optional scope; both start with a letter or digit, neither can hold a command.
_CHECKER = re.compile(
    r"([A-Za-z0-9][A-Za-z0-9_.-]{0,63})(?::([A-Za-z0-9][A-Za-z0-9_.@+/#-]{0,199}))?"
)


# path -> (file identity, max_bytes, result); see read_heartbeat.
_FILE_CACHE: dict[str, tuple[tuple[int, ...], int, ParseResult]] = {}
_FILE_CACHE_MAX = 50_000
_SETTLED_NS = 2_000_000_000


def read_heartbeat(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> ParseResult:
    """Read and parse one HEARTBEAT.md, never guessing at a file it cannot read.

    A missing file gives an empty result with ``missing=True``. A file over
    ``max_bytes``, not valid UTF-8, not a regular file (a symbolic link, a
    directory, a pipe) or not readable gives ``unreadable`` with a reason meant
    for the user. A UTF-8 BOM and CRLF line endings are fine.

    Symbolic links are refused because the agent can write the workspace: a
    link must not turn another file into heartbeat tasks. The file is opened
    without blocking, so a named pipe cannot hang a cycle.

    A cycle looks at thousands of files that rarely change, so a file whose
    device, inode, size, mtime and ctime are unchanged since it was last read
    is not read again. Only files that had already been left alone for two
    seconds when read are remembered, so a quick second write within the
    filesystem's timestamp granularity is never missed (git's "racy clean" rule).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ParseResult(missing=True)
    except OSError as exc:
        return ParseResult(unreadable=f"could not be read ({exc.strerror or exc})")
    problem = _file_problem(st, max_bytes)
    if problem:
        return ParseResult(unreadable=problem)
    name = str(path)
    cached = _FILE_CACHE.get(name)
    if cached and cached[0] == _identity(st) and cached[1] == max_bytes:
        return cached[2]
    result, read_st = _read_file(path, max_bytes)
    if read_st is not None and time.time_ns() - max(read_st.st_mtime_ns, read_st.st_ctime_ns) > (
        _SETTLED_NS
    ):
        if len(_FILE_CACHE) >= _FILE_CACHE_MAX:
            del _FILE_CACHE[next(iter(_FILE_CACHE))]
        _FILE_CACHE[name] = (_identity(read_st), max_bytes, result)
    return result


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _file_problem(st: os.stat_result, max_bytes: int) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link; vikingbot reads only a plain file"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size > max_bytes:
        return _too_big(st.st_size, max_bytes)
    return None


def _too_big(size: int, max_bytes: int) -> str:
    return f"file is {size} bytes, over the limit of {max_bytes} (bot.heartbeat.max_file_bytes)"


def _read_file(path: Path, max_bytes: int) -> tuple[ParseResult, os.stat_result | None]:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return ParseResult(missing=True), None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return ParseResult(unreadable=_file_problem(os.lstat(path), max_bytes)), None
        return ParseResult(unreadable=f"could not be read ({exc.strerror or exc})"), None
    try:
        st = os.fstat(fd)
        problem = _file_problem(st, max_bytes)
        if problem:
            return ParseResult(unreadable=problem), None
        data = _read_at_most(fd, st.st_size, max_bytes + 1)
    except OSError as exc:
        return ParseResult(unreadable=f"could not be read ({exc.strerror or exc})"), None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew while being read
        return ParseResult(unreadable=_too_big(len(data), max_bytes)), None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        return ParseResult(unreadable=reason), st
    return parse_heartbeat(text), (st if len(data) == st.st_size else None)


def _read_at_most(fd: int, expected: int, limit: int) -> bytes:
    """Read to EOF or ``limit`` bytes; sized by ``expected`` so the common case is one call."""
    chunks: list[bytes] = []
    total = 0
    want = min(expected + 1, limit)
    while total < limit:
        chunk = os.read(fd, want)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = min(65536, limit - total)
    return b"".join(chunks)


def parse_heartbeat(text: str) -> ParseResult:
    """Parse HEARTBEAT.md text. Never raises; malformed entries become ``errors``."""
    if len(text) <= 8192:
        return _parse_cached(text)
    return _parse(text)


@lru_cache(maxsize=512)
def _parse_cached(text: str) -> ParseResult:
    # Results are immutable, and thousands of workspaces hold the same template.
    return _parse(text)


@dataclass
class _Draft:
    """An entry being collected, line by line."""

    start: int  # 0-based index of the first line
    section: str
    checked: bool
    starts_in_comment: bool
    raw: list[str] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)


def _parse(text: str) -> ParseResult:
    if text.startswith(BOM):
        text = text[1:]
    drafts: list[_Draft] = []
    section = "none"  # resolved to "other" or "flat" once the whole file is seen
    saw_active = False
    in_comment = False
    cur: _Draft | None = None
    headings: list[Heading] = []

    for i, line in enumerate(text.split("\n")):
        if line.endswith("\r"):
            line = line[:-1]
        was_in_comment = in_comment
        if in_comment or "<!--" in line:
            visible, in_comment, had_comment = strip_comments(line, in_comment)
        else:
            visible, had_comment = line, False
        stripped = visible.strip()

        if cur is not None and (
            was_in_comment or (line[:1] in (" ", "\t") and (stripped or had_comment))
        ):
            cur.raw.append(line)
            if stripped:
                cur.parts.append(stripped)
            continue
        if cur is not None:
            drafts.append(cur)
            cur = None
        if not stripped:
            continue
        heading = _HEADING.fullmatch(stripped) if stripped[0] == "#" else None
        if heading:
            name = " ".join((heading.group(2) or "").strip("#").split()).casefold().rstrip(":")
            headings.append(Heading(i + 1, len(heading.group(1)), name))
            if name == ACTIVE:
                section, saw_active = "active", True
            elif name == COMPLETED:
                section = "completed"
            elif len(heading.group(1)) <= 2:
                section = "none"
            continue
        if _SEPARATOR.fullmatch(stripped):
            continue
        body = stripped
        marker = _LIST_MARKER.match(body)
        if marker:
            body = body[marker.end() :].lstrip()
        checked = False
        box = _CHECKBOX.match(body)
        if box:
            checked = box.group(1) in "xX"
            body = body[box.end() :].lstrip()
        cur = _Draft(start=i, section=section, checked=checked, starts_in_comment=was_in_comment)
        cur.raw.append(line)
        if body:
            cur.parts.append(body)
    if cur is not None:
        drafts.append(cur)

    outside: Section = "other" if saw_active else "flat"
    entries: list[Entry] = []
    for d in drafts:
        if d.parts:
            sect: Section = outside
            if d.section == "active":
                sect = "active"
            elif d.section == "completed":
                sect = "completed"
            entries.append(_build(d, sect))
    entries = _mark_duplicate_titles(entries)
    errors = tuple(
        EntryProblem(e.line, e.error, e.raw[0]) for e in entries if e.error and e.is_work
    )
    return ParseResult(entries=tuple(entries), errors=errors, headings=tuple(headings))


def starts_section(heading: Heading) -> bool:
    """Whether a heading begins a new section (it ends the one before it)."""
    return heading.name in (ACTIVE, COMPLETED) or heading.level <= 2


def strip_comments(line: str, in_comment: bool) -> tuple[str, bool, bool]:
    """The line without HTML comments; whether a comment is still open at its end."""
    pieces: list[str] = []
    pos, had = 0, False
    while True:
        if in_comment:
            end = line.find("-->", pos)
            had = True
            if end < 0:
                break
            pos, in_comment = end + 3, False
        else:
            start = line.find("<!--", pos)
            if start < 0:
                pieces.append(line[pos:])
                break
            pieces.append(line[pos:start])
            pos, in_comment, had = start + 4, True, True
    visible = " ".join(p.strip() for p in pieces if p.strip())
    return visible, in_comment, had


def _build(d: _Draft, section: Section) -> Entry:
    text = "\n".join(d.parts)
    joined = "\n".join(d.raw)
    if d.starts_in_comment:
        # The first line begins inside a comment opened above the entry: not a tag.
        close = joined.find("-->")
        joined = joined[close + 3 :] if close >= 0 else ""
    tags = tuple(_COMMENT.findall(joined)) if "<!--" in joined else ()
    problems: list[str] = []
    deliver = parked = None
    for tag in tags:
        m = _DELIVER.fullmatch(tag)
        if m:
            if deliver is not None and m.group(1) != deliver:
                problems.append(f"two different deliver: tags ({deliver!r} and {m.group(1)!r})")
            deliver = deliver or m.group(1)
        m = _PARKED.fullmatch(tag)
        if m and parked is None:
            parked = m.group(1) or "parked"
    entry = Entry(
        line=d.start + 1,
        end_line=d.start + len(d.raw),
        text=text,
        raw=tuple(d.raw),
        checked=d.checked,
        section=section,
        tags=tags,
        deliver=deliver,
        parked=parked,
    )
    if _KEY.search(text):
        entry = _scheduled(entry, problems)
    if problems:
        entry = replace(entry, error="; ".join(problems))
    return entry


def _scheduled(entry: Entry, problems: list[str]) -> Entry:
    """Read the keys of a scheduled entry; append what is wrong to ``problems``."""
    text = entry.text
    found = list(_KEY.finditer(text))
    values: dict[str, tuple[str, str]] = {}
    before = text[: found[0].start()].strip()
    if before:
        problems.append(
            f"text before the first key ({_short(before)!r}); "
            "a scheduled entry is only keys, put the words after task:"
        )
    for n, m in enumerate(found):
        word = m.group(1)
        canon = _KEYS[word.casefold()]
        end = found[n + 1].start() if n + 1 < len(found) else len(text)
        value = text[m.end() : end].strip()
        if canon in values:
            problems.append(f"{values[canon][0]}: is given twice")
            continue
        values[canon] = (word, value)

    title = task = None
    schedule: Schedule | None = None
    only_if: tuple[str, str | None] | None = None
    kinds = [k for k in ("every", "daily", "cron") if k in values]
    if "title" not in values and not kinds:
        used = ", ".join(w + ":" for w, _ in values.values())
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
        title = normalise_key(values["title"][1])

    if len(kinds) > 1 or (not kinds and "title" in values):
        given = ", ".join(values[k][0] + ":" for k in kinds) or "none"
        problems.append(
            "a scheduled entry needs exactly one of every: (alle:), daily: (täglich:) "
            f"or cron:, found {given}"
        )
    elif kinds:
        word, value = values[kinds[0]]
        schedule = _schedule(kinds[0], word, value, problems)

    if "only-if" in values:
        word, value = values["only-if"]
        checker = _CHECKER.fullmatch(value)
        if checker and ".." not in value:
            only_if = (checker.group(1), checker.group(2))
        else:
            problems.append(
                f"{word}: must name a checker configured under bot.heartbeat.checkers "
                f"(as name or name:scope), never a command; got {_short(value)!r}"
            )
    if "task" in values:
        if values["task"][1]:
            task = values["task"][1]
        else:
            problems.append(f"{values['task'][0]}: is empty")
    return replace(
        entry, scheduled=True, schedule=schedule, only_if=only_if, title=title, task=task
    )


def _schedule(kind: str, word: str, value: str, problems: list[str]) -> Schedule | None:
    if kind == "every":
        m = _DURATION.fullmatch(value)
        seconds = int(m.group(1)) * _UNIT_S[m.group(2).lower()] if m else 0
        if seconds <= 0:
            problems.append(
                f"{word}: needs a duration above zero like 90s, 30m, 2h or 1d, "
                f"got {_short(value)!r}"
            )
            return None
        return Schedule(kind="every", every_s=float(seconds))
    if kind == "daily":
        m = _HHMM.fullmatch(value)
        if not m or int(m.group(1)) > 23 or int(m.group(2)) > 59:
            problems.append(f"{word}: needs a time of day HH:MM (00:00-23:59), got {value!r}")
            return None
        return Schedule(kind="daily", daily=f"{int(m.group(1)):02d}:{m.group(2)}")
    expr = value
    if len(expr) >= 2 and expr[0] in "\"'" and expr[-1] == expr[0]:
        expr = expr[1:-1].strip()
    elif expr[:1] in ("'", '"'):
        problems.append(f"cron: has an unclosed quote: {_short(value)!r}")
        return None
    reason = cron_problem(expr)
    if reason:
        problems.append(reason)
        return None
    return Schedule(kind="cron", cron=" ".join(expr.split()))


@lru_cache(maxsize=1024)
def cron_problem(expr: str) -> str | None:
    """Why a 5-field cron expression is not usable, or ``None`` when it is fine."""
    fields = expr.split()
    if len(fields) != 5:
        return (
            "cron: needs 5 fields (minute hour day month weekday), quoted when it has "
            f'spaces, e.g. cron: "0 9 * * 1-5"; got {len(fields)} in {_short(expr)!r}'
        )
    try:
        next(CronSim(" ".join(fields), datetime(2000, 1, 1)))
    except CronSimError as exc:
        return f"cron: {expr!r} is not a valid expression ({exc})"
    except StopIteration:
        return f"cron: {expr!r} never fires"
    return None


def _mark_duplicate_titles(entries: list[Entry]) -> list[Entry]:
    seen: dict[str, int] = {}
    out = []
    for e in entries:
        if e.scheduled and e.is_work and e.title and e.error is None:
            folded = e.title.casefold()
            if folded in seen:
                e = replace(
                    e,
                    error=(
                        f"title {e.title!r} is already used by the entry on line "
                        f"{seen[folded]}; titles name entries and must be unique"
                    ),
                )
            else:
                seen[folded] = e.line
        out.append(e)
    return out


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
