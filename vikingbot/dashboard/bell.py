"""The bell: the inbox's unread count, pushed to open pages over server-sent events.

One poller per gateway reads ``(unread count, newest id)`` from the state store
while at least one page listens (every ``interval_s``; nothing runs when no page
is open). Reading the store rather than hooking the inbox's writers means a
result written by anyone (this gateway, a CLI run with no gateway, another
gateway on the same PostgreSQL database) rings the bell.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from loguru import logger
from sqlalchemy.exc import SQLAlchemyError

if TYPE_CHECKING:
    from vikingbot.store.db import StateStore

Reading = tuple[int, int]  # (unread count, newest item id)


class Bell:
    def __init__(self, read: Callable[[], Reading], interval_s: float = 0.25) -> None:
        self._read = read
        self.interval_s = interval_s
        self._listeners: set[asyncio.Queue[Reading]] = set()
        self._task: asyncio.Task[None] | None = None
        self.last: Reading | None = None

    async def listen(self, stop: asyncio.Event | None = None) -> AsyncIterator[Reading]:
        """Yield the current reading, then every change, until the client goes."""
        queue: asyncio.Queue[Reading] = asyncio.Queue(maxsize=16)
        self._listeners.add(queue)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._poll(), name="vikingbot:dashboard-bell")
        try:
            if self.last is None:
                self.last = await asyncio.to_thread(self._read)
            yield self.last
            stopped = asyncio.ensure_future(stop.wait()) if stop is not None else None
            try:
                while stop is None or not stop.is_set():
                    got = asyncio.ensure_future(queue.get())
                    waiting = {got} if stopped is None else {got, stopped}
                    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                    if not got.done():  # the gateway is stopping: end the stream
                        got.cancel()
                        return
                    yield got.result()
            finally:
                if stopped is not None:
                    stopped.cancel()
        finally:
            self._listeners.discard(queue)

    async def _poll(self) -> None:
        while self._listeners:
            try:
                reading = await asyncio.to_thread(self._read)
            except (SQLAlchemyError, OSError) as exc:  # the database is away: keep the last reading
                logger.warning("dashboard bell: cannot read the inbox: {}", exc)
                reading = self.last or (0, 0)
            if reading != self.last:
                self.last = reading
                for q in list(self._listeners):
                    with contextlib.suppress(asyncio.QueueFull):
                        q.put_nowait(reading)
            await asyncio.sleep(self.interval_s)


def inbox_reading(store: StateStore) -> Callable[[], Reading]:
    from sqlalchemy import func, select

    from vikingbot.store.tables import inbox

    def read() -> Reading:
        with store.engine.connect() as conn:
            unread = conn.execute(
                select(func.count()).select_from(inbox).where(inbox.c.read_at.is_(None))
            ).scalar_one()
            newest = conn.execute(select(func.max(inbox.c.id))).scalar_one()
        return int(unread), int(newest or 0)

    return read
