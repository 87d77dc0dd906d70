"""A server-sent event stream read incrementally, with caps (total: never raises).

The HTML standard's event-stream grammar: lines end in CR, LF or CRLF; a blank line
dispatches the event; a line starting with ``:`` is a comment (a keep-alive);
``field: value`` sets ``event``, ``data`` (lines joined by LF) or ``id``; other
fields are ignored. A line longer than ``max_line`` bytes, or an event whose data
passes ``max_event`` bytes, is dropped whole (counted in ``dropped``), so a
misbehaving server cannot grow this reader's memory without bound.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_LINE = 1 << 20
MAX_EVENT = 4 << 20


class SseEvent(NamedTuple):
    event: str  # "message" when the stream named none
    data: str
    id: str | None  # the last id the stream set (it carries over to later events)


class SseReader:
    def __init__(self, *, max_line: int = MAX_LINE, max_event: int = MAX_EVENT) -> None:
        self.max_line = max_line
        self.max_event = max_event
        self.last_id: str | None = None
        self.dropped = 0
        self._line = bytearray()
        self._skipping = False  # inside a line that passed max_line
        self._cr = False  # the previous chunk ended in CR (a CRLF may be split)
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._oversized = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events that ``chunk`` completes, in order."""
        out: list[SseEvent] = []
        start = 0
        if self._cr and chunk[:1] == b"\n":
            start = 1
        self._cr = False
        i = start
        n = len(chunk)
        while i < n:
            byte = chunk[i]
            if byte in (10, 13):  # LF, CR
                self._piece(chunk[start:i])
                self._end_line(out)
                if byte == 13:
                    if i + 1 < n and chunk[i + 1] == 10:
                        i += 1
                    elif i + 1 == n:
                        self._cr = True
                start = i + 1
            i += 1
        self._piece(chunk[start:n])
        return out

    def _piece(self, piece: bytes) -> None:
        if self._skipping or not piece:
            return
        if len(self._line) + len(piece) > self.max_line:
            self._line.clear()
            self._skipping = True
            self.dropped += 1
            return
        self._line += piece

    def _end_line(self, out: list[SseEvent]) -> None:
        if self._skipping:
            self._skipping = False
            self._oversized = True  # the event lost a line: it is not delivered
            return
        line = bytes(self._line).decode("utf-8", errors="replace")
        self._line.clear()
        if not line:
            self._dispatch(out)
            return
        if line.startswith(":"):
            return
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._event = value
        elif field == "data":
            self._size += len(value) + 1
            if self._size > self.max_event:
                if not self._oversized:
                    self.dropped += 1
                self._oversized = True
                self._data.clear()
            else:
                self._data.append(value)
        elif field == "id" and "\0" not in value:
            self.last_id = value

    def _dispatch(self, out: list[SseEvent]) -> None:
        if self._data and not self._oversized:
            out.append(SseEvent(self._event or "message", "\n".join(self._data), self.last_id))
        self._event, self._data, self._size, self._oversized = "", [], 0, False
