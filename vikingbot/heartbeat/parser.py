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
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from vikingbot.fsutil import BOM
from vikingbot.heartbeat.entry_keys import has_keys, scheduled_fields, short, typo_problem
from vikingbot.heartbeat.types import (
    Entry,
    EntryProblem,
    Heading,
    ParseResult,
    Section,
    normalise_key,
)

DEFAULT_MAX_BYTES = 256 * 1024
ACTIVE = "active tasks"
COMPLETED = "completed"

_LIST_MARKER = re.compile(r"(?:[-*+]|[0-9]{1,9}[.)])(?=\s|$)")
_CHECKBOX = re.compile(r"\[([ xX])\](?=\s|$)")
_SEPARATOR_CHARS = "-*_="


# path -> (file identity, max_bytes, result); see read_heartbeat.
_FILE_CACHE: dict[str, tuple[tuple[int, ...], int, ParseResult]] = {}
_FILE_CACHE_MAX = 50_000
_SETTLED_NS = 2_000_000_000


def read_heartbeat(path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES) -> ParseResult:
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
    result, read_st, _ = _read_file(path, max_bytes)
    if read_st is not None and time.time_ns() - max(read_st.st_mtime_ns, read_st.st_ctime_ns) > (
        _SETTLED_NS
    ):
        if len(_FILE_CACHE) >= _FILE_CACHE_MAX:
            del _FILE_CACHE[next(iter(_FILE_CACHE))]
        _FILE_CACHE[name] = (_identity(read_st), max_bytes, result)
    return result


def read_heartbeat_text(
    path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES, *, lstat: os.stat_result | None = None
) -> tuple[ParseResult, str | None]:
    """Like :func:`read_heartbeat` (without its cache), and the text that was parsed
    (``None`` when the file was not read whole as UTF-8): the heartbeat's index keeps
    it so a restart parses the text again instead of reading the file.

    ``lstat``: the caller's ``os.lstat(path)`` of a moment ago (the index has just
    looked at the file), so it is not looked at twice; the file is checked again
    once opened, whatever it says."""
    if lstat is not None:
        st = lstat
    else:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return ParseResult(missing=True), None
        except OSError as exc:
            return ParseResult(unreadable=f"could not be read ({exc.strerror or exc})"), None
    problem = _file_problem(st, max_bytes)
    if problem:
        return ParseResult(unreadable=problem), None
    result, read_st, text = _read_file(path, max_bytes)
    return result, (text if read_st is not None else None)


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


def _read_file(
    path: Path | str, max_bytes: int
) -> tuple[ParseResult, os.stat_result | None, str | None]:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return ParseResult(missing=True), None, None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return ParseResult(unreadable=_file_problem(os.lstat(path), max_bytes)), None, None
        return ParseResult(unreadable=f"could not be read ({exc.strerror or exc})"), None, None
    try:
        st = os.fstat(fd)
        problem = _file_problem(st, max_bytes)
        if problem:
            return ParseResult(unreadable=problem), None, None
        data = _read_at_most(fd, st.st_size, max_bytes + 1)
    except OSError as exc:
        return ParseResult(unreadable=f"could not be read ({exc.strerror or exc})"), None, None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew while being read
        return ParseResult(unreadable=_too_big(len(data), max_bytes)), None, None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        return ParseResult(unreadable=reason), st, None
    whole = len(data) == st.st_size
    return parse_heartbeat(text), (st if whole else None), (text if whole else None)


def _read_at_most(fd: int, expected: int, limit: int) -> bytes:
    """Read to EOF or ``limit`` bytes; sized by ``expected`` so the common case is one call.

    A first read that asked for one byte more than ``expected`` and got exactly
    ``expected`` bytes met the end of the file: no second call to learn it (a file
    that grows afterwards has a new mtime, and is read again when that is seen)."""
    chunks: list[bytes] = []
    total = 0
    want = min(expected + 1, limit)
    while total < limit:
        chunk = os.read(fd, want)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total == expected < want:
            break
        want = min(65536, limit - total)
    return b"".join(chunks)


def parse_heartbeat(text: str) -> ParseResult:
    """Parse HEARTBEAT.md text. Never raises, runs in linear time; bad entries become ``errors``."""
    if len(text) <= 8192:
        return _parse_cached(text)
    return _parse(text)


@lru_cache(maxsize=512)
def _parse_cached(text: str) -> ParseResult:
    # Results are immutable, and thousands of workspaces hold the same template.
    return _parse(text)


class _Draft:
    """An entry being collected, line by line (a plain slotted class: files hold 65k of them)."""

    __slots__ = ("checked", "parts", "raw", "section", "start", "starts_in_comment")

    def __init__(
        self, start: int, section: str, checked: bool, starts_in_comment: bool, line: str
    ) -> None:
        self.start = start  # 0-based index of the first line
        self.section = section
        self.checked = checked
        self.starts_in_comment = starts_in_comment
        self.raw = [line]
        self.parts: list[str] = []


class _Scanner:
    """Reads the file one line at a time: headings, separators, entries and their continuations."""

    def __init__(self) -> None:
        self.drafts: list[_Draft] = []
        self.headings: list[Heading] = []
        self.section = "none"  # resolved to "other" or "flat" once the whole file is seen
        self.saw_active = False
        self.in_comment = False
        self.cur: _Draft | None = None

    def feed(self, i: int, line: str) -> None:
        was_in_comment = self.in_comment
        if self.in_comment or "<!--" in line:
            visible, self.in_comment, had_comment = strip_comments(line, self.in_comment)
        else:
            visible, had_comment = line, False
        stripped = visible.strip()
        cur = self.cur
        if cur is not None and (
            was_in_comment or (line[:1] in (" ", "\t") and (stripped or had_comment))
        ):
            cur.raw.append(line)
            if stripped:
                cur.parts.append(stripped)
            return
        self.close()
        if not stripped or self._heading(i, stripped) or _is_separator(stripped):
            return
        self._start(i, line, stripped, was_in_comment)

    def close(self) -> None:
        if self.cur is not None:
            self.drafts.append(self.cur)
            self.cur = None

    def _heading(self, i: int, stripped: str) -> bool:
        found = heading_of(stripped) if stripped[0] == "#" else None
        if found is None:
            return False
        level, name = found
        self.headings.append(Heading(i + 1, level, name))
        if name == ACTIVE:
            self.section, self.saw_active = "active", True
        elif name == COMPLETED:
            self.section = "completed"
        elif level <= 2:
            self.section = "none"
        return True

    def _start(self, i: int, line: str, body: str, was_in_comment: bool) -> None:
        marker = _LIST_MARKER.match(body)
        if marker:
            body = body[marker.end() :].lstrip()
        box = _CHECKBOX.match(body)
        checked = bool(box) and box is not None and box.group(1) in "xX"
        if box:
            body = body[box.end() :].lstrip()
        cur = _Draft(i, self.section, checked, was_in_comment, line)
        if body:
            cur.parts.append(body)
        self.cur = cur

    def result(self) -> ParseResult:
        self.close()
        outside: Section = "other" if self.saw_active else "flat"
        entries: list[Entry] = []
        seen = _Seen()
        for d in self.drafts:
            if d.parts:
                sect: Section = outside
                if d.section in ("active", "completed"):
                    sect = "active" if d.section == "active" else "completed"
                entries.append(_build(d, sect, seen))
        errors = tuple(
            EntryProblem(e.line, e.error, e.raw[0]) for e in entries if e.error and e.is_work
        )
        return ParseResult(entries=tuple(entries), errors=errors, headings=tuple(self.headings))


def _parse(text: str) -> ParseResult:
    scanner = _Scanner()
    for i, line in enumerate(text.removeprefix(BOM).split("\n")):
        scanner.feed(i, line.removesuffix("\r"))
    return scanner.result()


def heading_of(stripped: str) -> tuple[int, str] | None:
    """``(level, name)`` when a stripped line is an ATX heading (``## Active Tasks``)."""
    level = len(stripped) - len(stripped.lstrip("#"))
    if not 1 <= level <= 6:
        return None
    rest = stripped[level:]
    if rest and not rest[0].isspace():
        return None
    name = " ".join(rest.strip().strip("#").split()).casefold().rstrip(":")
    return level, name


def _is_separator(stripped: str) -> bool:
    """A thematic break such as ``---``, ``* * *`` or ``===``."""
    c = stripped[0]
    if c not in _SEPARATOR_CHARS or stripped.count(c) < 3:
        return False
    return not stripped.replace(c, "").strip(" \t")


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


def comments(text: str) -> tuple[str, ...]:
    """Every closed ``<!-- ... -->`` in ``text``, as written, in one linear pass."""
    found = []
    pos = 0
    while (start := text.find("<!--", pos)) >= 0:
        end = text.find("-->", start + 4)
        if end < 0:
            break
        found.append(text[start : end + 3])
        pos = end + 3
    return tuple(found)


def tag_value(tag: str, name: str) -> str | None:
    """The value of ``<!-- name: value -->`` (name matched without regard to ASCII case)."""
    inner = tag[4:-3].strip()
    head = inner[: len(name) + 1]
    if head.isascii() and head.lower() == name + ":":
        return inner[len(name) + 1 :].strip()
    return None


def _tags(d: _Draft) -> tuple[str, ...]:
    joined = "\n".join(d.raw)
    if d.starts_in_comment:
        # The first line begins inside a comment opened above the entry: not a tag.
        close = joined.find("-->")
        joined = joined[close + 3 :] if close >= 0 else ""
    return comments(joined) if "<!--" in joined else ()


@dataclass
class _Seen:
    """What earlier entries used: titles (folded) with their line, keys with their count."""

    titles: dict[str, int] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)


def _tag_values(tags: tuple[str, ...], problems: list[str]) -> tuple[str | None, str | None]:
    deliver = parked = None
    for tag in tags:
        value = tag_value(tag, "deliver")
        if value is not None:
            if deliver is not None and value != deliver:
                problems.append(
                    f"two different deliver: tags ({short(deliver)!r} and {short(value)!r})"
                )
            deliver = deliver or value
        value = tag_value(tag, "parked")
        if value is not None and parked is None:
            parked = value or "parked"
    return deliver, parked


def _build(d: _Draft, section: Section, seen: _Seen) -> Entry:
    problems: list[str] = []
    if len(d.raw) == 1 and not d.starts_in_comment and "<!--" not in d.raw[0]:
        tags: tuple[str, ...] = ()
        deliver = parked = None
    else:
        tags = _tags(d)
        deliver, parked = _tag_values(tags, problems)
    text = d.parts[0] if len(d.parts) == 1 else "\n".join(d.parts)
    if has_keys(text):
        fields = scheduled_fields(text, problems)
    else:
        fields = {}
        typo = typo_problem(text) if ":" in text else None
        if typo:
            problems.append(typo)
    work = not d.checked and section in ("active", "flat")
    title = fields.get("title")
    if work and title and not problems:
        first = seen.titles.setdefault(title.casefold(), d.start + 1)
        if first != d.start + 1:
            problems.append(
                f"title {short(title)!r} is already used by the entry on line {first}; "
                "titles name entries and must be unique"
            )
    key = title or normalise_key(text)  # as Entry.key
    occurrence = 0
    if work:
        occurrence = seen.keys.get(key, 0)
        seen.keys[key] = occurrence + 1
    return Entry(
        line=d.start + 1,
        end_line=d.start + len(d.raw),
        text=text,
        raw=tuple(d.raw),
        checked=d.checked,
        section=section,
        tags=tags,
        deliver=deliver,
        parked=parked,
        error="; ".join(problems) or None,
        occurrence=occurrence,
        **fields,
    )
