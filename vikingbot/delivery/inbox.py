"""The local inbox: where ``dashboard`` results wait until someone reads them.

Until a web dashboard exists, a result for ``dashboard`` / ``dashboard:<slot>``
is a row in the ``inbox`` table (kind ``message``), shown by ``vikingbot
inbox`` with an unread mark. ``prompt:dashboard:<slot>`` lands here too, with
kind ``prompt``: text meant to be put to the agent as a user prompt in that
slot (the gateway turns prompts into turns). The inbox is also the last resort
for a result that has nowhere else to go.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from vikingbot.clock import Clock, SystemClock
from vikingbot.delivery.outbox import db_errors as _db

if TYPE_CHECKING:
    from vikingbot.store.db import StateStore

InboxKind = Literal["message", "prompt"]


@dataclass(frozen=True)
class InboxItem:
    id: int
    slot: str
    text: str
    source: str | None
    kind: str
    created_at: datetime
    read_at: datetime | None

    @property
    def unread(self) -> bool:
        return self.read_at is None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "unread": self.unread}


class Inbox:
    def __init__(self, store: StateStore, clock: Clock | None = None) -> None:
        self._store = store
        self._clock: Clock = clock or SystemClock()

    def add(
        self, slot: str, text: str, *, source: str | None = None, kind: InboxKind = "message"
    ) -> int:
        """Store one item (unread); its id."""
        from vikingbot.store.tables import inbox

        values = {
            "slot": slot[:200],
            "text": text,
            "source": source[:300] if source else None,
            "kind": kind,
            "created_at": self._clock.now(),
        }
        with _db("add an item"), self._store.engine.begin() as conn:
            result = conn.execute(inbox.insert().values(**values))
            key = result.inserted_primary_key
        return int(key[0]) if key else 0

    def items(
        self,
        *,
        unread_only: bool = True,
        kind: InboxKind | None = None,
        slot: str | None = None,
        limit: int | None = None,
    ) -> list[InboxItem]:
        """Items oldest first; by default only unread ones."""
        from sqlalchemy import select

        from vikingbot.store.tables import inbox

        query = select(inbox).order_by(inbox.c.created_at, inbox.c.id)
        if unread_only:
            query = query.where(inbox.c.read_at.is_(None))
        if kind is not None:
            query = query.where(inbox.c.kind == kind)
        if slot is not None:
            query = query.where(inbox.c.slot == slot)
        if limit is not None:
            query = query.limit(limit)
        with _db("read items"), self._store.engine.connect() as conn:
            return [
                InboxItem(r.id, r.slot, r.text, r.source, r.kind, r.created_at, r.read_at)
                for r in conn.execute(query)
            ]

    def items_after(self, after_id: int, limit: int = 100) -> list[InboxItem]:
        """Items with an id above ``after_id``, oldest first (a feed to follow)."""
        from sqlalchemy import select

        from vikingbot.store.tables import inbox

        query = select(inbox).where(inbox.c.id > after_id).order_by(inbox.c.id).limit(limit)
        with _db("read new items"), self._store.engine.connect() as conn:
            return [
                InboxItem(r.id, r.slot, r.text, r.source, r.kind, r.created_at, r.read_at)
                for r in conn.execute(query)
            ]

    def last_id(self) -> int:
        from sqlalchemy import func, select

        from vikingbot.store.tables import inbox

        with _db("read the newest item id"), self._store.engine.connect() as conn:
            return int(conn.execute(select(func.max(inbox.c.id))).scalar() or 0)

    def unread_count(self) -> int:
        from sqlalchemy import func, select

        from vikingbot.store.tables import inbox

        query = select(func.count()).select_from(inbox).where(inbox.c.read_at.is_(None))
        with _db("count unread items"), self._store.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def mark_read(self, ids: Sequence[int] | None = None) -> int:
        """Mark these items (or every unread one) read; how many changed."""
        from sqlalchemy import update

        from vikingbot.store.tables import inbox

        stmt = update(inbox).where(inbox.c.read_at.is_(None)).values(read_at=self._clock.now())
        if ids is not None:
            if not ids:
                return 0
            stmt = stmt.where(inbox.c.id.in_(list(ids)))
        with _db("mark items read"), self._store.engine.begin() as conn:
            return int(conn.execute(stmt).rowcount or 0)
