"""File I/O on an agent's behalf: never blocking the gateway, always bounded.

Everything the gateway opens or reads because an agent asked (built-in file
tools, ACP ``fs/*`` requests, context files, skills, MCP) goes through here:

- ``open_regular(path, label)`` opens with ``O_NONBLOCK`` and checks the open
  fd with ``fstat``: a named pipe, socket or device is refused at once (a FIFO
  opened for a plain blocking read would hang its thread until someone writes);
- ``read_capped(path, label, max_bytes)`` reads a whole regular file or
  refuses it, naming its size and the cap;
- ``Lane.run(fn, *args)`` runs blocking work in the *agent* thread pool
  (``THREADS`` threads, apart from the default pool the gateway's own services
  use), at most ``PER_TURN`` at once for one turn: one turn's I/O can only
  wait on itself, never on the threads chats, webhooks and the control API need;
- ``running_turn(turn_id, timeout_s)`` marks a turn as running, so that
  ``problems()`` can say when a turn is stuck past its timeout, or when every
  agent I/O thread has been busy for ``BUSY_AFTER_S`` (the gateway's ``/health``
  turns ``degraded`` with that line).
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import functools
import itertools
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from vikingbot.errors import ToolError

T = TypeVar("T")

THREADS = 16  # the agent I/O pool
PER_TURN = 2  # threads one turn may hold at once
BUSY_AFTER_S = 10.0  # every thread busy this long: /health says so
STUCK_GRACE_S = 10.0  # a turn still running this long after its timeout is stuck

_pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="agent-io")
_lock = threading.Lock()
_busy: dict[int, float] = {}  # job number -> monotonic start
_jobs = itertools.count()
_turns: dict[str, float] = {}  # turn id -> monotonic deadline (inf: no timeout)


def open_regular(path: Path, label: str) -> int:
    """An fd for reading ``path``, which must be a regular file (checked on the open fd)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as exc:
        raise ToolError(f"{label}: no such file") from exc
    except IsADirectoryError as exc:
        raise ToolError(f"{label} is a directory (use list_dir)") from exc
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO with no writer on some systems
            raise ToolError(f"{label} is not a regular file; only regular files are read") from exc
        raise ToolError(f"{label}: could not be read ({exc.strerror or exc})") from exc
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise ToolError(f"{label} is a directory (use list_dir)")
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ToolError(
            f"{label} is not a regular file (a pipe, socket or device); only regular files are read"
        )
    os.set_blocking(fd, True)
    return fd


def read_capped(path: Path, label: str, max_bytes: int) -> bytes:
    """The whole regular file; one over ``max_bytes`` is refused, not read."""
    fd = open_regular(path, label)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise ToolError(f"{label} is {size} bytes, over the {max_bytes}-byte limit")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ToolError(f"{label} grew over the {max_bytes}-byte limit while being read")
    return data


def _tracked(fn: Callable[[], T]) -> T:
    job = next(_jobs)
    with _lock:
        _busy[job] = time.monotonic()
    try:
        return fn()
    finally:
        with _lock:
            del _busy[job]


@dataclass
class Lane:
    """One turn's way into the agent I/O pool (at most ``PER_TURN`` threads at once)."""

    slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(PER_TURN))

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args)`` in an agent I/O thread (context variables carried, as ``to_thread``)."""
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        async with self.slots:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(_pool, _tracked, call)


@contextmanager
def running_turn(turn_id: str, timeout_s: float | None) -> Iterator[None]:
    """Mark ``turn_id`` as running until the block ends (for ``problems``)."""
    deadline = time.monotonic() + timeout_s if timeout_s else float("inf")
    with _lock:
        _turns[turn_id] = deadline
    try:
        yield
    finally:
        with _lock:
            _turns.pop(turn_id, None)


def problems(now: float | None = None) -> list[str]:
    """Why agent work is wedged, one sentence each (empty: it is not)."""
    now = time.monotonic() if now is None else now
    found: list[str] = []
    with _lock:
        busy = sorted(_busy.values())
        stuck = sorted((now - d, t) for t, d in _turns.items() if now - d > STUCK_GRACE_S)
    if len(busy) >= THREADS and now - busy[-1] > BUSY_AFTER_S:
        found.append(
            f"agent I/O: all {THREADS} threads busy for {now - busy[-1]:.0f} s "
            "(a file or file system that does not answer)"
        )
    for late, turn_id in stuck:
        found.append(f"turn {turn_id} stuck {late:.0f} s past its timeout")
    return found
