"""The outbox: every outgoing message is written down before it is sent.

One row per ``dedupe_key`` (table ``outbox``). The row is inserted as
``pending`` before the first send and marked ``sent`` once the platform took
every piece, so after a crash the channel manager re-sends what is still
pending, and a key that is already ``sent`` is never sent again. A message split
into pieces remembers how many pieces went out (``details.parts_sent``), so a
crash in the middle does not repeat the first pieces.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from vikingbot.bus import OutboundMessage
from vikingbot.clock import Clock, SystemClock
from vikingbot.errors import StoreError

if TYPE_CHECKING:
    from vikingbot.store.db import StateStore

PENDING, SENT, FAILED = "pending", "sent", "failed"


@dataclass(frozen=True)
class OutboxRow:
    dedupe_key: str
    channel: str
    channel_id: str
    chat_id: str
    thread: str | None
    text: str
    status: str
    attempts: int
    parts_sent: int
    created_at: datetime
    sent_at: datetime | None = None
    last_error: str | None = None
    metadata: dict[str, Any] | None = None

    def message(self) -> OutboundMessage:
        return OutboundMessage(
            channel=self.channel,
            chat_id=self.chat_id,
            text=self.text,
            thread=self.thread,
            channel_id=self.channel_id,
            dedupe_key=self.dedupe_key,
            metadata=dict(self.metadata or {}),
        )


def _plain(metadata: dict[str, Any]) -> dict[str, Any]:
    """The JSON-safe part of a message's metadata."""
    return {
        k: v for k, v in metadata.items() if isinstance(v, str | int | float | bool) or v is None
    }


@contextmanager
def db_errors(doing: str) -> Iterator[None]:
    """Turn SQLAlchemy errors into :class:`StoreError` naming the task."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except SQLAlchemyError as exc:
        raise StoreError(f"state database: cannot {doing}: {exc}") from exc


class Outbox:
    def __init__(self, store: StateStore, clock: Clock | None = None) -> None:
        self._store = store
        self._clock: Clock = clock or SystemClock()

    def _row(self, r: Any) -> OutboxRow:
        details = r.details or {}
        return OutboxRow(
            dedupe_key=r.dedupe_key,
            channel=r.channel,
            channel_id=r.channel_id,
            chat_id=r.chat_id,
            thread=r.thread,
            text=r.text,
            status=r.status,
            attempts=r.attempts or 0,
            parts_sent=int(details.get("parts_sent", 0)),
            created_at=r.created_at,
            sent_at=r.sent_at,
            last_error=r.last_error,
            metadata=details.get("metadata"),
        )

    def get(self, dedupe_key: str) -> OutboxRow | None:
        from sqlalchemy import select

        from vikingbot.store.tables import outbox

        with db_errors("read the outbox"), self._store.engine.connect() as conn:
            r = conn.execute(select(outbox).where(outbox.c.dedupe_key == dedupe_key)).first()
        return self._row(r) if r is not None else None

    def claim(self, msg: OutboundMessage, dedupe_key: str) -> OutboxRow:
        """Write ``msg`` as pending under ``dedupe_key``, or return the row already there.

        A ``failed`` row is set back to ``pending`` (it is being tried again);
        a ``sent`` row is returned as it is, so the caller sends nothing.
        """
        from sqlalchemy import insert
        from sqlalchemy.exc import IntegrityError

        from vikingbot.store.tables import outbox

        try:
            with db_errors("write the outbox"), self._store.engine.begin() as conn:
                conn.execute(
                    insert(outbox).values(
                        dedupe_key=dedupe_key,
                        channel=msg.channel,
                        channel_id=msg.channel_id,
                        chat_id=msg.chat_id,
                        thread=msg.thread,
                        text=msg.text,
                        status=PENDING,
                        attempts=0,
                        created_at=self._clock.now(),
                        details={"parts_sent": 0, "metadata": _plain(msg.metadata)},
                    )
                )
        except StoreError as exc:
            if not isinstance(exc.__cause__, IntegrityError):
                raise
            return self._existing(msg, dedupe_key)
        return OutboxRow(
            dedupe_key=dedupe_key,
            channel=msg.channel,
            channel_id=msg.channel_id,
            chat_id=msg.chat_id,
            thread=msg.thread,
            text=msg.text,
            status=PENDING,
            attempts=0,
            parts_sent=0,
            created_at=self._clock.now(),
            metadata=_plain(msg.metadata),
        )

    def _existing(self, msg: OutboundMessage, dedupe_key: str) -> OutboxRow:
        """The row already holding ``dedupe_key``; a failed one goes back to pending."""
        existing = self.get(dedupe_key)
        if existing is None:  # deleted in between; try once more
            return self.claim(msg, dedupe_key)
        if existing.status == FAILED:
            self._update(dedupe_key, status=PENDING)
            return replace(existing, status=PENDING)
        return existing

    def _update(self, dedupe_key: str, **values: Any) -> None:
        from sqlalchemy import update

        from vikingbot.store.tables import outbox

        with db_errors("update the outbox"), self._store.engine.begin() as conn:
            conn.execute(update(outbox).where(outbox.c.dedupe_key == dedupe_key).values(**values))

    def part_sent(self, row: OutboxRow, parts_sent: int) -> None:
        """Record that the first ``parts_sent`` pieces went out."""
        details = {"parts_sent": parts_sent, "metadata": row.metadata or {}}
        self._update(row.dedupe_key, details=details)

    def mark_sent(self, dedupe_key: str, attempts: int | None = None) -> None:
        values: dict[str, Any] = {"status": SENT, "sent_at": self._clock.now(), "last_error": None}
        if attempts is not None:
            values["attempts"] = attempts
        self._update(dedupe_key, **values)

    def mark_failed(self, dedupe_key: str, error: str, attempts: int | None = None) -> None:
        values: dict[str, Any] = {"status": FAILED, "last_error": error[:2000]}
        if attempts is not None:
            values["attempts"] = attempts
        self._update(dedupe_key, **values)

    def rows(self, status: str | None = None, limit: int = 1000) -> list[OutboxRow]:
        """Rows, oldest first, optionally only those with ``status``."""
        from sqlalchemy import select

        from vikingbot.store.tables import outbox

        query = select(outbox).order_by(outbox.c.id).limit(limit)
        if status is not None:
            query = query.where(outbox.c.status == status)
        with db_errors("read the outbox"), self._store.engine.connect() as conn:
            return [self._row(r) for r in conn.execute(query)]

    def pending(self, limit: int = 1000) -> list[OutboxRow]:
        return self.rows(PENDING, limit)
