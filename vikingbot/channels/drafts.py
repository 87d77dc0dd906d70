"""Where a live reply's preview is, kept in the state database across a crash.

A channel that streams a reply by editing one message (``Channel.draft``) records
that message's id here when it posts the preview, and forgets it once the final
reply replaced it. A gateway killed mid-stream leaves the id behind; the restarted
gateway, answering the kept inbound message again (``channels/kept.py``), finds it
and edits that same message instead of posting a second one, so a crashed stream
leaves at most one partial message and it is then completed.

The ids share ``channel_offsets`` (a string key, an integer, a time) under
``<channel>:draft:<chat>:<thread>``. A preview older than :data:`FRESH_S` is not
taken up again: a later turn in that chat posts a new message rather than rewrite
an old one. Every call is best effort: the database away only costs the resume.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

from loguru import logger
from sqlalchemy import delete, select

from vikingbot.store.db import upsert_insert
from vikingbot.store.tables import channel_offsets

if TYPE_CHECKING:
    from vikingbot.clock import Clock
    from vikingbot.store.db import StateStore

FRESH_S = 600.0  # a preview left longer ago than this is not resumed


def draft_key(channel: str, chat_id: str, thread: str | None) -> str:
    """The row key of the preview in ``chat_id`` (``thread``) of ``channel`` (capped)."""
    return f"{channel}:draft:{chat_id}:{thread or ''}"[:200]


class Drafts:
    """The live-reply preview ids of one channel, in the state database."""

    def __init__(self, channel: str, store: StateStore, clock: Clock) -> None:
        self.channel = channel
        self.store = store
        self.clock = clock

    def _get(self, key: str) -> int | None:
        t = channel_offsets
        with self.store.engine.connect() as conn:
            row = conn.execute(select(t.c.next_update, t.c.updated_at).where(t.c.channel == key))
            found = row.first()
        if found is None:
            return None
        value, at = found
        if at is None or self.clock.now() - at > timedelta(seconds=FRESH_S):
            return None
        return int(value)

    def _put(self, key: str, message_id: int) -> None:
        t = channel_offsets
        now = self.clock.now()
        stmt = upsert_insert(self.store.backend, t).values(
            channel=key, next_update=message_id, updated_at=now
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[t.c.channel],
            set_={"next_update": stmt.excluded.next_update, "updated_at": now},
        )
        with self.store.engine.begin() as conn:
            conn.execute(stmt)

    def _drop(self, key: str) -> None:
        with self.store.engine.begin() as conn:
            conn.execute(delete(channel_offsets).where(channel_offsets.c.channel == key))

    async def left(self, chat_id: str, thread: str | None) -> int | None:
        """The message id of a preview a previous run left in this chat, if fresh."""
        key = draft_key(self.channel, chat_id, thread)
        try:
            return await asyncio.to_thread(self._get, key)
        except Exception as exc:  # best effort: a new preview is posted
            logger.warning("{}: cannot read the live reply of {}: {}", self.channel, chat_id, exc)
            return None

    async def posted(self, chat_id: str, thread: str | None, message_id: int) -> None:
        """The preview in this chat is ``message_id`` now."""
        key = draft_key(self.channel, chat_id, thread)
        try:
            await asyncio.to_thread(self._put, key, message_id)
        except Exception as exc:  # best effort: a crash now leaves a second preview
            logger.warning("{}: cannot keep the live reply of {}: {}", self.channel, chat_id, exc)

    async def done(self, chat_id: str, thread: str | None) -> None:
        """The preview in this chat became the reply: forget it."""
        key = draft_key(self.channel, chat_id, thread)
        try:
            await asyncio.to_thread(self._drop, key)
        except Exception as exc:  # it expires after FRESH_S
            logger.warning("{}: cannot forget the live reply of {}: {}", self.channel, chat_id, exc)
