"""No stdio MCP server outlives the process that started it (Linux ``/proc``).

Stopping a server ends its process group, and also every process descended from it
found under ``/proc`` (a ``setsid`` grandchild is in no group of the server's):
SIGTERM, a short grace, SIGKILL. :class:`Running` records each live server (its pid,
process group and start time, and the starting process's) in
``<data>/mcp/running.json``; a hub that starts reads it first and ends the servers of
a process that is gone (a gateway killed with SIGKILL), by the same rule. A pid is
only signalled when its start time is the recorded one, so a reused pid is never hit.
Elsewhere than Linux only the process group is ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

from loguru import logger

from vikingbot.fsutil import atomic_write_text

MAX_PROCS = 100_000  # /proc entries looked at per walk


def started_at(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot, ``/proc/<pid>/stat`` field 22)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw.rpartition(b")")[2].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _parents() -> dict[int, int]:
    found: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries[:MAX_PROCS]:
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/stat").read_bytes()
            found[int(name)] = int(raw.rpartition(b")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Every process descended from ``pid`` (children first), from one ``/proc`` walk."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    out: list[int] = []
    todo = list(children.get(pid, ()))
    while todo and len(out) < MAX_PROCS:
        nxt = todo.pop()
        out.append(nxt)
        todo.extend(children.get(nxt, ()))
    return out


def _signal(pids: list[int], pgid: int | None, sig: int) -> None:
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            continue
        state = Path(f"/proc/{pid}/stat")
        with contextlib.suppress(OSError):
            if state.read_bytes().rpartition(b")")[2].split()[0] == b"Z":
                continue  # a zombie: already ended, waiting for its parent
        out.append(pid)
    return out


def end_tree(
    pid: int, *, grace_s: float = 1.0, also: tuple[int, ...] = (), alive: bool = True
) -> None:
    """SIGTERM ``pid``'s process group, and (``alive``: ``pid`` is still the server) it and
    its descendants, and ``also``; then SIGKILL what is left after ``grace_s``.
    Blocking: call it off the event loop."""
    pids = [pid, *descendants(pid), *also] if alive else list(also)
    _signal(pids, pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = _alive(pids)
    if left:
        _signal(left, pid, signal.SIGKILL)


class Record(NamedTuple):
    """One live server: its pid (= its process group) and start time, and its starter's."""

    pid: int
    started: int
    owner: int
    owner_started: int


class Running:
    """``running.json``: the stdio servers this data folder's processes have running."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def _read(self) -> dict[str, Record]:
        if self.path is None:
            return {}
        try:
            raw = json.loads(self.path.read_text("utf-8"))
            return {k: Record(*v) for k, v in raw.items() if isinstance(v, list) and len(v) == 4}
        except (OSError, ValueError, TypeError):
            return {}

    def _write(self, records: dict[str, Record]) -> None:
        if self.path is None:
            return
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps({k: list(v) for k, v in records.items()}) + "\n"
            atomic_write_text(self.path, text, mode=0o600)

    def add(self, pid: int) -> None:
        started, me = started_at(pid), os.getpid()
        owner_started = started_at(me)
        if started is None or owner_started is None:
            return
        records = self._read()
        records[str(pid)] = Record(pid, started, me, owner_started)
        self._write(records)

    def remove(self, pid: int) -> None:
        records = self._read()
        if records.pop(str(pid), None) is not None:
            self._write(records)

    def reap_left(self) -> int:
        """End the recorded servers whose starting process is gone; how many were."""
        records = self._read()
        kept = {k: r for k, r in records.items() if started_at(r.owner) == r.owner_started}
        ended = 0
        for key, rec in records.items():
            if key in kept or started_at(rec.pid) != rec.started:
                continue  # its starter still runs it, or it is gone (or the pid was reused)
            logger.warning("MCP server process {} was left by a stopped gateway: ended", rec.pid)
            end_tree(rec.pid)
            ended += 1
        if len(kept) != len(records):
            self._write(kept)
        return ended
