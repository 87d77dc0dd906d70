"""Saving HEARTBEAT.md from the page: the heartbeat's lock, a merge, nothing lost.

The page sends the text it loaded (``base``) and the text the user wants
(``mine``). Under the same OS lock and atomic replace as the heartbeat's own
rewrites (``heartbeat.rewrite.locked_edit``), the current file is read again:
unchanged since the page loaded → ``mine`` is written; changed → the three are
merged line by line; when both changed the same lines the save is refused and
the page shows the user's text beside the file's current text. A plain Save
after that conflicts again (the page keeps the text it first loaded as
``base``); only the explicit "overwrite theirs" (``overwrite=True``, ``base``
the text the page showed as theirs) replaces the other edit.

A Save whose text equals what the page loaded (line endings aside: browsers
send CRLF and drop a leading blank line) writes nothing. The dashboard refuses
what the heartbeat refuses: a symbolic link (or any non-regular file) as
``HEARTBEAT.md`` is neither shown nor written.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from vikingbot.dashboard.merge import merge3
from vikingbot.errors import WorkspaceError
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.rewrite import locked_edit

MAX_BYTES = 256 * 1024


@dataclass(frozen=True)
class SaveResult:
    status: str  # saved | merged | unchanged | conflict | too-big
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


def same(a: str, b: str) -> bool:
    """Equal once every line ending (``\r\n``, ``\r``) is ``\n``."""
    return a.replace("\r\n", "\n").replace("\r", "\n") == b.replace("\r\n", "\n").replace(
        "\r", "\n"
    )


def problems(text: str) -> list[Problem]:
    parsed = parse_heartbeat(text)
    found = [Problem(p.line, p.message) for p in parsed.errors]
    return sorted(found, key=lambda p: p.line)


def load(path: Path) -> str:
    """The file's text, line endings kept; ``""`` when missing. A symbolic link, pipe or
    other non-regular file raises ``WorkspaceError`` (never followed, never blocking)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise WorkspaceError(
                f"{path.name} is a symbolic link; the dashboard does not follow it"
            ) from None
        raise WorkspaceError(f"{path.name}: could not be read ({exc.strerror or exc})") from exc
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise WorkspaceError(
                f"{path.name} is not a regular file; the dashboard does not read it"
            )
        data = fh.read(MAX_BYTES + 1)
    return data.decode("utf-8", "replace").removeprefix("\ufeff")


def save(path: Path, base: str, mine: str, *, overwrite: bool = False) -> SaveResult:
    """Save ``mine`` over the file the page loaded as ``base`` (module docstring)."""
    if same(base, mine) and not overwrite:
        return SaveResult("unchanged", base, mine)
    base, mine = normalise(base), normalise(mine)
    if len(mine.encode("utf-8")) > MAX_BYTES:
        return SaveResult("too-big", load(path), mine)
    outcome: list[SaveResult] = []

    def edit(current: str) -> str:
        crlf = "\r\n" in current
        theirs = normalise(current)
        if same(theirs, base):
            outcome[:] = [SaveResult("saved", mine, mine)]
            return current if same(current, mine) else _endings(mine, crlf)
        merged = merge3(base, mine, theirs) if not overwrite else None
        if merged is None or merged.text is None:
            line = merged.conflict_line if merged is not None else None
            outcome[:] = [SaveResult("conflict", theirs, mine, line)]
            return current
        outcome[:] = [SaveResult("merged", merged.text, mine)]
        return _endings(merged.text, crlf)

    locked_edit(path, edit)
    return outcome[0]


def _endings(text: str, crlf: bool) -> str:
    return text.replace("\n", "\r\n") if crlf else text
