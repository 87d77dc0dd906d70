"""Held answers for the fake chat platforms: a send whose answer never comes, as if
the bot's process died waiting for it (the outbox's possibly-sent rows)."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.requests import Request


class Stalls:
    """Which of the sends to come are held, and the holding itself.

    ``cond`` is the owning fake's condition (its waiters see ``stalled`` grow);
    ``closing`` tells whether the fake's server is stopping (held answers then go)."""

    def __init__(self, cond: threading.Condition, closing: Any) -> None:
        self._cond = cond
        self._closing = closing
        self.stalled = 0  # sends whose answer is being held right now or was
        self._queue: list[list[Any]] = []  # per stall to come: [let by first, take it]
        self._released = threading.Event()

    def add(self, *, take: bool, skip: int) -> None:
        with self._cond:
            self._queue.append([skip, take])

    def next(self) -> bool | None:
        """For a send arriving now (under the fake's lock): take-and-hold, hold, or None."""
        if not self._queue:
            return None
        if self._queue[0][0] > 0:
            self._queue[0][0] -= 1
            return None
        return bool(self._queue.pop(0)[1])

    def release(self) -> None:
        """Answer every held send now (and those stalled later at once)."""
        self._released.set()

    async def hold(self, request: Request) -> None:
        with self._cond:
            self.stalled += 1
            self._cond.notify_all()
        while not (self._released.is_set() or self._closing()):
            if await request.is_disconnected():
                return
            await asyncio.sleep(0.02)  # the server's own loop, looking again
