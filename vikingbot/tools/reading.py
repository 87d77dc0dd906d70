"""Reading workspace files for the agent: regular files only, bounded memory, never blocking.

A named pipe, socket or device in the workspace is refused without being
opened for a blocking read (a FIFO would hang until someone writes to it), and
no read holds more than a bounded amount of a file in memory, however large
the file is (``agentio.open_regular`` opens every file). The functions are
blocking; the tools call them through the turn's ``agentio.Lane``, so the event
loop keeps answering and the gateway's own threads stay free.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from pathlib import Path

from vikingbot.agentio import open_regular
from vikingbot.errors import ToolError

MAX_READ_CHARS = 100_000  # what one read_file call returns at most
MAX_SCAN_BYTES = 64 * 1024 * 1024  # how far a read scans for line numbers and the line count
_CHUNK = 64 * 1024


def read_text(path: Path, label: str, max_bytes: int) -> str:
    """The whole file as UTF-8 text; a file over ``max_bytes`` is refused, not read."""
    fd = open_regular(path, label)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise ToolError(
                f"{label} is {size} bytes, over the {max_bytes}-byte limit for this tool"
            )
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ToolError(f"{label} grew over the {max_bytes}-byte limit while being read")
    return decode(data, label)


def decode(data: bytes, label: str) -> str:
    if b"\x00" in data[:8192]:
        raise ToolError(f"{label} is a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{label} is not valid UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc


@dataclass
class _Lines:
    """Lines ``[offset, offset + limit)`` of a file, collected while scanning it once."""

    offset: int
    limit: int | None
    out: list[str]
    chars: int = 0
    line: int = 1  # number of the line the next piece belongs to
    truncated: bool = False

    def take(self, piece: str) -> None:
        wanted = self.line >= self.offset and (
            self.limit is None or self.line < self.offset + self.limit
        )
        if wanted and not self.truncated:
            room = MAX_READ_CHARS - self.chars
            self.out.append(piece[:room])
            self.chars += min(len(piece), room)
            self.truncated = len(piece) > room


def read_lines(path: Path, label: str, offset: int, limit: int | None) -> str:
    """Lines ``offset``.. (1-based) of a text file, at most ``MAX_READ_CHARS`` characters.

    The file is scanned in chunks (at most ``MAX_SCAN_BYTES``), so memory stays
    bounded whatever its size; the note at the end says how to read on.
    """
    fd = open_regular(path, label)
    lines = _Lines(offset, limit, [])
    decoder = codecs.getincrementaldecoder("utf-8")()
    scanned, first, end_seen = 0, True, False
    with os.fdopen(fd, "rb") as fh:
        while scanned < MAX_SCAN_BYTES:
            chunk = fh.read(_CHUNK)
            if first and b"\x00" in chunk[:8192]:
                raise ToolError(f"{label} is a binary file, not text")
            first = False
            try:
                text = decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                raise ToolError(
                    f"{label} is not valid UTF-8 text ({exc.reason} near byte "
                    f"{scanned + exc.start})"
                ) from exc
            scanned += len(chunk)
            *whole, rest = text.split("\n")
            for piece in whole:
                lines.take(piece + "\n")
                lines.line += 1
            if rest:
                lines.take(rest)
            if lines.truncated:
                break
            if not chunk:
                end_seen = True
                break
    return _with_note(lines, end_seen)


def _with_note(lines: _Lines, end_seen: bool) -> str:
    text = "".join(lines.out)
    total = lines.line - 1 if text.endswith("\n") or not text else lines.line
    end = lines.offset - 1 + lines.limit if lines.limit else None
    if lines.truncated:
        return text + f"\n[... truncated at {MAX_READ_CHARS} characters; use offset/limit]"
    if end is not None and (total > end or not end_seen):
        more = f"{total - end} more lines" if end_seen else "more lines"
        return text + f"\n[... {more}; read on with offset={end + 1}]"
    if not end_seen:
        return text + f"\n[... the file goes on past {MAX_SCAN_BYTES} bytes]"
    return text
