"""Where a channel's receiver stopped, kept in the state database for the next one.

A receiver that polls (Telegram's update id) or follows a timeline (Matrix's
event time) records how far it has handled messages, under ``<channel>:default``
in ``channel_offsets``. The gateway that receives next, this one after a restart
or another after a failover, starts from there: it neither handles a message
twice nor skips one. The position only moves forward, so a receiver that lost
its lease a moment ago cannot move it back.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from loguru import logger
from sqlalchemy import func, select

from vikingbot.store.db import upsert_insert
from vikingbot.store.tables import channel_offsets

if TYPE_CHECKING:
    from datetime import datetime

    from vikingbot.store.db import StateStore


def _read(store: StateStore, key: str) -> int | None:
    try:
        with store.engine.connect() as conn:
            found = conn.execute(
                select(channel_offsets.c.next_update).where(channel_offsets.c.channel == key)
            ).scalar()
    except Exception as exc:  # the database away: go on from what this process knows
        logger.warning("channel {}: cannot read the stored position: {}", key, exc)
        return None
    return int(found) if found is not None else None


def _write(store: StateStore, key: str, value: int, now: datetime) -> None:
    t = channel_offsets
    pg = store.backend == "postgresql"
    insert = upsert_insert(store.backend, t).values(channel=key, next_update=value, updated_at=now)
    larger = (func.greatest if pg else func.max)(t.c.next_update, insert.excluded.next_update)
    stmt = insert.on_conflict_do_update(
        index_elements=[t.c.channel],
        set_={"next_update": larger, "updated_at": insert.excluded.updated_at},
    )
    try:
        with store.engine.begin() as conn:
            conn.execute(stmt)
    except Exception as exc:  # the platform confirms it the next time round
        logger.warning("channel {}: cannot store the position: {}", key, exc)


async def stored(store: StateStore | None, channel: str) -> int | None:
    """The position the gateways sharing ``store`` have handled ``channel`` up to."""
    if store is None:
        return None
    return await asyncio.to_thread(_read, store, f"{channel}:default")


async def advance(store: StateStore | None, channel: str, value: int, now: datetime) -> None:
    """Record that ``channel``'s messages up to ``value`` are handled (never backwards)."""
    if store is not None:
        await asyncio.to_thread(_write, store, f"{channel}:default", value, now)
