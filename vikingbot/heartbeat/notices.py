"""Telling the owner once: one mechanism for the heartbeat and cron.

A notice is keyed by its *content* (what the problem is: an entry's text and
error, a job's name and reason), never by where it sits (a line number) or
when it happened, so a problem that persists is told once however many
cycles see it, and a different problem is told on its own. ``resolve`` forgets
a key when its problem is over, so the next occurrence is news again (and says
whether there was anything to forget, for "it works again" notices).

Keys are stored hashed in the ``notices`` table (workspace, digest, kind, at),
so "told once" survives restarts.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from loguru import logger
from sqlalchemy import and_, delete, insert, select
from sqlalchemy.exc import IntegrityError

from vikingbot.clock import Clock
from vikingbot.store.db import StateStore
from vikingbot.store.tables import notices

SendNotice = Callable[[str, str], Awaitable[Any]]
"""``send(text, dedupe_key)``: hand one notice to delivery (to the owner)."""


def digest_of(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


class Notifier:
    def __init__(self, store: StateStore, send: SendNotice, clock: Clock) -> None:
        self.store = store
        self.send = send
        self.clock = clock

    async def tell(self, workspace: str, key: str, text: str, *, kind: str = "notice") -> bool:
        """Send ``text`` to the owner unless ``key`` was told already; True when sent."""
        digest = digest_of(key)
        at = self.clock.now()
        first = await asyncio.to_thread(self._claim, workspace, digest, kind, at)
        if not first:
            return False
        try:
            # the telling's time is in the key: told again after ``resolve``, it is sent again
            await self.send(text, f"notice:{workspace}:{digest[:16]}:{at:%Y%m%dT%H%M%S%f}")
        except Exception:
            logger.bind(workspace=workspace).exception("could not tell the owner: {}", text)
            await asyncio.to_thread(self._forget, workspace, digest)  # try again next time
            return False
        return True

    async def announce(self, workspace: str, text: str) -> None:
        """Send ``text`` now, once per call (news that is not a standing problem)."""
        try:
            await self.send(
                text, f"notice:{workspace}:{digest_of(text + self.clock.now().isoformat())[:16]}"
            )
        except Exception:
            logger.bind(workspace=workspace).exception("could not tell the owner: {}", text)

    async def resolve(self, workspace: str, key: str) -> bool:
        """Forget ``key`` (its problem is over); True when it had been told."""
        return await asyncio.to_thread(self._forget, workspace, digest_of(key))

    def told(self, workspace: str, key: str) -> bool:
        with self.store.engine.connect() as conn:
            row = conn.execute(
                select(notices.c.digest).where(
                    and_(notices.c.workspace == workspace, notices.c.digest == digest_of(key))
                )
            ).first()
        return row is not None

    def forget_sync(self, workspace: str, key: str) -> bool:
        return self._forget(workspace, digest_of(key))

    def _claim(self, workspace: str, digest: str, kind: str, at: datetime) -> bool:
        try:
            with self.store.engine.begin() as conn:
                seen = conn.execute(
                    select(notices.c.digest).where(
                        and_(notices.c.workspace == workspace, notices.c.digest == digest)
                    )
                ).first()
                if seen:
                    return False
                conn.execute(
                    insert(notices).values(
                        workspace=workspace, digest=digest, kind=kind[:50], at=at
                    )
                )
        except IntegrityError:  # another process told it a moment ago
            return False
        return True

    def _forget(self, workspace: str, digest: str) -> bool:
        with self.store.engine.begin() as conn:
            done = conn.execute(
                delete(notices).where(
                    and_(notices.c.workspace == workspace, notices.c.digest == digest)
                )
            )
        return bool(done.rowcount)
