"""Inbound messages kept in the state database until they are answered.

A channel that answers "accepted" to its sender (the webhook's HTTP 202) writes
the message here first (:meth:`InboundStore.keep`), so a crash between the 202
and the reply loses nothing. The row records which gateway took it
(``taker``, the gateway's id in the ``gateways`` registry). It is marked
``answered`` once the agent's reply was handed to delivery (the outbox has it).

After a crash the row stays ``pending``. :meth:`InboundStore.take_orphans` hands
the pending rows whose taker is not a live gateway (it stopped, went silent for
``dead_after_s``, or never registered, like the previous run of a restarted
gateway) to the caller, one taker per row (a compare-and-set on ``taker``). The
answer's dedupe key is derived from the row id (:func:`run_id`), so a row
answered twice (the crash fell after the outbox took the reply and before the
row was marked) still sends one reply: the outbox sends a key once.

``attempts`` counts the turns started on a row (:meth:`InboundStore.started`);
a row whose turn was started ``MAX_ATTEMPTS`` times without an answer (a message
that crashes the gateway every time) is handed out marked :func:`gave_up`: the
gateway answers it with an apology instead of running the agent on it again, so
the sender still gets one answer and a crash loop ends. Being queued by a
gateway that died before it got to the row costs nothing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import and_, delete, func, insert, or_, select, update

from vikingbot.bus import InboundMessage
from vikingbot.clock import Clock, SystemClock
from vikingbot.store.leases import store_now
from vikingbot.store.liveness import DEAD_AFTER_S, alive_gateway
from vikingbot.store.tables import inbound_messages

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vikingbot.store.db import StateStore

PENDING, ANSWERED = "pending", "answered"
MAX_ATTEMPTS = 5
KEEP_ANSWERED = timedelta(days=7)  # answered rows older than this are deleted
INBOUND_ID = "inbound_id"  # InboundMessage.metadata key of the stored row's id
GAVE_UP = "inbound_gave_up"  # metadata key: turns begun on it without an answer


def run_id(row_id: int) -> str:
    """The run id of the turn answering row ``row_id`` (its replies' dedupe keys start so)."""
    return f"inbound-{row_id}"


class InboundStore:
    """The ``inbound_messages`` table. Thread-safe; calls block (use a worker thread)."""

    def __init__(
        self,
        store: StateStore,
        clock: Clock | None = None,
        *,
        dead_after_s: float = DEAD_AFTER_S,
    ) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.dead_after_s = dead_after_s

    def _now(self, conn: Connection) -> datetime:
        postgres = conn.dialect.name == "postgresql"
        return store_now(conn, self.clock, "database" if postgres else "clock")

    def keep(self, msg: InboundMessage, taker: str | None) -> InboundMessage:
        """Write ``msg`` down (taken by ``taker``); returns it with its row id in metadata."""
        with self.store._failures("keep an inbound message"), self.store.engine.begin() as conn:
            now = self._now(conn)
            result = conn.execute(
                insert(inbound_messages).values(
                    channel=msg.channel,
                    channel_id=msg.channel_id,
                    chat_id=msg.chat_id,
                    sender_id=msg.sender_id,
                    thread=msg.thread,
                    text=msg.text,
                    received_at=now,
                    status=PENDING,
                    taker=taker,
                    attempts=0,
                )
            )
            row_id = int(result.inserted_primary_key[0])  # type: ignore[index]
        return _with_id(msg, row_id)

    def answered(self, row_id: int) -> None:
        """The reply to row ``row_id`` is with delivery: never take it again."""
        with (
            self.store._failures("mark an inbound message answered"),
            self.store.engine.begin() as conn,
        ):
            conn.execute(
                update(inbound_messages)
                .where(inbound_messages.c.id == row_id)
                .values(status=ANSWERED, answered_at=self._now(conn))
            )

    def started(self, row_id: int) -> None:
        """A turn on row ``row_id`` begins (counted against ``MAX_ATTEMPTS``)."""
        table = inbound_messages
        with (
            self.store._failures("count an inbound message's turn"),
            self.store.engine.begin() as conn,
        ):
            conn.execute(
                update(table).where(table.c.id == row_id).values(attempts=table.c.attempts + 1)
            )

    def take_orphans(self, taker: str, channel: str, limit: int = 500) -> list[InboundMessage]:
        """Take the pending rows of ``channel`` whose taker is not a live gateway, oldest first."""
        table = inbound_messages
        with (
            self.store._failures("take unanswered inbound messages"),
            self.store.engine.begin() as conn,
        ):
            now = self._now(conn)
            alive = alive_gateway(table.c.taker, now, self.dead_after_s)
            rows = conn.execute(
                select(table)
                .where(
                    table.c.status == PENDING,
                    table.c.channel == channel,
                    or_(table.c.taker.is_(None), table.c.taker != taker),
                    ~alive,
                )
                .order_by(table.c.id)
                .limit(limit)
            ).all()
            taken: list[InboundMessage] = []
            for r in rows:
                # compare-and-set: another gateway taking the same row at once changed taker
                same = table.c.taker.is_(None) if r.taker is None else table.c.taker == r.taker
                won = conn.execute(
                    update(table)
                    .where(table.c.id == r.id, table.c.status == PENDING, same)
                    .values(taker=taker)
                ).rowcount
                if not won:
                    continue
                msg = InboundMessage(
                    channel=r.channel,
                    chat_id=r.chat_id,
                    sender_id=r.sender_id,
                    text=r.text,
                    thread=r.thread,
                    channel_id=r.channel_id,
                    received_at=r.received_at,
                    metadata={GAVE_UP: r.attempts} if r.attempts >= MAX_ATTEMPTS else {},
                )
                taken.append(_with_id(msg, r.id))
            conn.execute(
                delete(table).where(
                    and_(table.c.status != PENDING, table.c.answered_at < now - KEEP_ANSWERED)
                )
            )
        return taken

    def counts(self, channel: str | None = None) -> dict[str, int]:
        """How many rows are in each status (for tests, status and the dashboard)."""
        table = inbound_messages
        query = select(table.c.status, func.count()).group_by(table.c.status)
        if channel is not None:
            query = query.where(table.c.channel == channel)
        with self.store._failures("count inbound messages"), self.store.engine.connect() as conn:
            return {status: int(n) for status, n in conn.execute(query).all()}


def _with_id(msg: InboundMessage, row_id: int) -> InboundMessage:
    return replace(msg, metadata={**msg.metadata, INBOUND_ID: row_id, "run_id": run_id(row_id)})


def gave_up(msg: InboundMessage) -> int | None:
    """How many turns were begun on ``msg`` without an answer, when that is too many
    (``MAX_ATTEMPTS``): answer it with an apology, not with the agent. Else None."""
    value = msg.metadata.get(GAVE_UP)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def apology(msg: InboundMessage, tries: int) -> str:
    """The answer to a message that stopped the bot ``tries`` times."""
    quoted = " ".join(msg.text.split())
    if len(quoted) > 200:
        quoted = quoted[:199] + "…"
    return (
        f'Sorry, I could not answer your message "{quoted}": answering it stopped the bot '
        f"{tries} times. Please send it again, perhaps in other words."
    )


def row_id_of(msg: InboundMessage) -> int | None:
    """The stored row id of ``msg``, or None when it was not kept."""
    value = msg.metadata.get(INBOUND_ID)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
