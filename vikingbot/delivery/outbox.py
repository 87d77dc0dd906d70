"""The outbox: every outgoing message is written down before it is sent.

One row per ``dedupe_key`` (table ``outbox``). The row is inserted as
``pending`` before the first send and marked ``sent`` once the platform took
every piece, so after a crash the channel manager re-sends what is still
pending, and a key that is already ``sent`` is never sent again. A message split
into pieces remembers how many pieces went out (``details.parts_sent``), so a
crash in the middle does not repeat the first pieces.

Several gateways may share the database (see docs/scaling.md). A pending row is
sent by one gateway at a time: the row records its ``sender`` (the gateway's id
in the ``gateways`` registry) and a ``lease_until`` renewed with every part sent.
Rows stay with their sender while it is a live gateway; ``claim_pending`` hands
out the rows of senders that are not (they stopped, went silent for
``dead_after_s``, or never registered, like the previous run of a restarted
gateway) with ``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL, under SQLite's
write lock otherwise. Liveness is judged by the database's clock on PostgreSQL
(as in ``vikingbot.store.leases``).

One window stays: a sender killed after the platform took a message and before it
was marked sent leaves it pending, and the gateway that takes it over sends it
again (chat platforms have no idempotency key). Such a row is known: every write
made just before a piece goes on the wire says so (``details.sending``: the insert
of a new row, the take-over of an existing one, :meth:`Outbox.begin` before a row
claimed by the sweep is sent, and each ``part_sent`` before the next piece), and
only ``mark_sent``/``mark_failed`` end it. A pending row that carries the mark is
``possibly_sent``: the piece at ``parts_sent`` may already be in the chat. Taking
it over to send adds one to ``details.taken_in_flight`` (in the same write), so a
message a chat got twice can be told apart from anything else. The mark errs one way only:
a sender killed between that write and the request leaves a row marked that was
not sent; a row without the mark was never on the wire.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from vikingbot.clock import Clock, SystemClock
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import StoreError
from vikingbot.store.liveness import DEAD_AFTER_S, alive_gateway, process_id

if TYPE_CHECKING:
    from collections.abc import Collection

    from sqlalchemy import Connection

    from vikingbot.store.db import StateStore

PENDING, SENT, FAILED = "pending", "sent", "failed"
SEND_LEASE_S = 120.0  # how long a send is expected to take at most (shown as in flight)


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
    #: Whether this outbox (this gateway) holds the row's send lease. False: another
    #: gateway is sending it right now; leave it alone.
    mine: bool = True
    #: Pending, and a send of piece ``parts_sent`` began without its end being
    #: recorded (its sender died or was stopped mid-send): it may be in the chat.
    possibly_sent: bool = False
    #: How many times a sender took the row over to send while it was possibly sent.
    taken_in_flight: int = 0

    def details(self, *, parts_sent: int | None = None, sending: bool = True) -> dict[str, Any]:
        """The row's ``details`` column, as a write that is about to send (``sending``)
        or has just recorded ``parts_sent`` pieces writes it."""
        return {
            "parts_sent": self.parts_sent if parts_sent is None else parts_sent,
            "metadata": self.metadata or {},
            "sending": sending,
            "taken_in_flight": self.taken_in_flight,
        }

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
    """The outbox of one sender (a gateway, a CLI command).

    ``sender`` names this process in the rows it is sending (default: host, pid and
    a random suffix); ``lease_s`` is how long its claim on a pending row lasts
    without a sign of progress.
    """

    def __init__(
        self,
        store: StateStore,
        clock: Clock | None = None,
        *,
        sender: str | None = None,
        lease_s: float = SEND_LEASE_S,
        dead_after_s: float = DEAD_AFTER_S,
    ) -> None:
        self._store = store
        self._clock: Clock = clock or SystemClock()
        self.sender = (sender or process_id())[:200]
        self.lease_s = lease_s
        self.dead_after_s = dead_after_s

    def _now(self, conn: Connection) -> datetime:
        from vikingbot.store.leases import store_now

        return store_now(
            conn, self._clock, "database" if conn.dialect.name == "postgresql" else "clock"
        )

    def _until(self, conn: Connection) -> datetime:
        from datetime import timedelta

        return self._now(conn) + timedelta(seconds=self.lease_s)

    def _sender_alive(self, now: datetime) -> Any:
        """SQL: the row's sender is a live gateway other than this one."""
        from vikingbot.store.tables import outbox

        return alive_gateway(outbox.c.sender, now, self.dead_after_s)

    def _row(self, r: Any, *, mine: bool = True) -> OutboxRow:
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
            mine=mine,
            possibly_sent=r.status == PENDING and bool(details.get("sending")),
            taken_in_flight=int(details.get("taken_in_flight", 0)),
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
        a ``sent`` row is returned as it is, so the caller sends nothing; a pending
        row another gateway is sending comes back with ``mine=False`` (send nothing).
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
                        # the caller sends right after this commit: the mark is on
                        details={
                            "parts_sent": 0,
                            "metadata": _plain(msg.metadata),
                            "sending": True,
                        },
                        sender=self.sender,
                        lease_until=self._until(conn),
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
        """The row already holding ``dedupe_key``, taken over when nobody is sending it.

        A failed row goes back to pending and becomes ours; a pending row whose
        sender's lease ran out (or that is ours) becomes ours; a pending row another
        live sender holds comes back with ``mine=False``; a sent row as it is. A row
        that becomes ours is marked as being sent (the caller sends at once); if it
        was possibly sent, the take-over is counted in the same write (``taken_in_flight``).
        """
        from sqlalchemy import select, update

        from vikingbot.store.tables import outbox

        with db_errors("write the outbox"), self._store.engine.begin() as conn:
            now = self._now(conn)
            alive = self._sender_alive(now).label("alive")
            query = select(outbox, alive).where(outbox.c.dedupe_key == dedupe_key)
            if conn.dialect.name == "postgresql":
                query = query.with_for_update(of=outbox)
            r = conn.execute(query).first()
            if r is not None:
                if r.status == SENT:
                    return self._row(r)
                live = bool(r.alive)
                if r.status == PENDING and live and r.sender != self.sender:
                    return self._row(r, mine=False)
                row = self._row(r)
                again = row.taken_in_flight + row.possibly_sent
                row = replace(row, status=PENDING, taken_in_flight=again)
                conn.execute(
                    update(outbox)
                    .where(outbox.c.id == r.id)
                    .values(
                        status=PENDING,
                        sender=self.sender,
                        lease_until=self._until(conn),
                        details=row.details(),
                    )
                )
                return row
        return self.claim(msg, dedupe_key)  # deleted in between; try once more

    def claim_pending(
        self, channels: Collection[str] | None = None, limit: int = 100
    ) -> list[OutboxRow]:
        """Take up to ``limit`` pending rows nobody is sending (oldest first).

        Rows held by a live sender, and rows another gateway is claiming at this
        very moment (``SKIP LOCKED``), are left alone. ``channels`` limits the
        rows to channels this gateway can send on.
        """
        from sqlalchemy import select, update

        from vikingbot.store.tables import outbox

        with db_errors("claim pending outbox rows"), self._store.engine.begin() as conn:
            now = self._now(conn)
            query = (
                select(outbox)
                .where(
                    outbox.c.status == PENDING,
                    outbox.c.sender.is_distinct_from(self.sender),
                    ~self._sender_alive(now),
                )
                .order_by(outbox.c.id)
                .limit(limit)
            )
            if channels is not None:
                query = query.where(outbox.c.channel.in_(list(channels)))
            if conn.dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True, of=outbox)
            found = conn.execute(query).all()
            if found:
                # Check again now that the rows are locked. On PostgreSQL the
                # select's NOT EXISTS is planned as an anti-join, and the re-check
                # that READ COMMITTED does on a row another gateway claimed (and
                # committed) meanwhile does not re-run that join: the row would
                # come back although its new sender is alive. This statement sees
                # that commit, and nobody can change the locked rows before ours.
                kept = conn.execute(
                    update(outbox)
                    .where(
                        outbox.c.id.in_([r.id for r in found]),
                        outbox.c.status == PENDING,
                        outbox.c.sender.is_distinct_from(self.sender),
                        ~self._sender_alive(now),
                    )
                    .values(sender=self.sender, lease_until=self._until(conn))
                    .returning(outbox.c.id)
                )
                ids = {row.id for row in kept}
                found = [r for r in found if r.id in ids]
        return [self._row(r) for r in found]

    def begin(self, row: OutboxRow) -> OutboxRow | None:
        """Mark a row this sender claimed (``claim_pending``) as being sent, just
        before it is; None when it is no longer this sender's pending row.

        One statement per row the sweep sends (rows left by a dead sender, rare):
        ``claim_pending`` takes up to a hundred rows at once, and marking them all
        there would call rows possibly sent that this sender never started.
        """
        from sqlalchemy import update

        from vikingbot.store.tables import outbox

        again = replace(row, taken_in_flight=row.taken_in_flight + row.possibly_sent)
        with db_errors("update the outbox"), self._store.engine.begin() as conn:
            done = conn.execute(
                update(outbox)
                .where(
                    outbox.c.dedupe_key == row.dedupe_key,
                    outbox.c.status == PENDING,
                    outbox.c.sender == self.sender,
                )
                .values(lease_until=self._until(conn), details=again.details())
            )
        return again if done.rowcount else None

    def _update(self, dedupe_key: str, **values: Any) -> None:
        from sqlalchemy import update

        from vikingbot.store.tables import outbox

        with db_errors("update the outbox"), self._store.engine.begin() as conn:
            conn.execute(update(outbox).where(outbox.c.dedupe_key == dedupe_key).values(**values))

    def part_sent(self, row: OutboxRow, parts_sent: int) -> None:
        """Record that the first ``parts_sent`` pieces went out (and renew the lease);
        the next piece is sent right after, so the row stays marked as being sent."""
        self.renew(row.dedupe_key, details=row.details(parts_sent=parts_sent))

    def renew(self, dedupe_key: str, **values: Any) -> None:
        """Keep this sender's lease on a row it is still working on."""
        from sqlalchemy import update

        from vikingbot.store.tables import outbox

        with db_errors("update the outbox"), self._store.engine.begin() as conn:
            conn.execute(
                update(outbox)
                .where(outbox.c.dedupe_key == dedupe_key)
                .values(lease_until=self._until(conn), sender=self.sender, **values)
            )

    def mark_sent(self, dedupe_key: str, attempts: int | None = None) -> None:
        values: dict[str, Any] = {
            "status": SENT,
            "sent_at": self._clock.now(),
            "last_error": None,
            "lease_until": None,
        }
        if attempts is not None:
            values["attempts"] = attempts
        self._update(dedupe_key, **values)

    def mark_failed(self, dedupe_key: str, error: str, attempts: int | None = None) -> None:
        values: dict[str, Any] = {"status": FAILED, "last_error": error[:2000], "lease_until": None}
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

    def texts_since(self, channel: str, chat_id: str, since: datetime) -> list[str]:
        """What went (or is going) to one chat or inbox slot since ``since``, newest
        first: the texts a new result is compared with (failed rows left out)."""
        from sqlalchemy import select

        from vikingbot.store.tables import outbox

        c = outbox.c
        query = (
            select(c.text)
            .where(c.channel == channel, c.chat_id == chat_id)
            .where(c.created_at >= since, c.status != FAILED)
            .order_by(c.id.desc())
            .limit(1000)
        )
        return self._texts(query)

    def texts_of_run(self, run_id: str) -> list[str]:
        """The texts written under a run's keys (``<run_id>:...``), oldest first."""
        from sqlalchemy import select

        from vikingbot.store.tables import outbox

        c = outbox.c
        query = (
            select(c.text)
            .where(c.dedupe_key.startswith(run_id + ":", autoescape=True))
            .order_by(c.id)
        )
        return self._texts(query)

    def _texts(self, query: Any) -> list[str]:
        with db_errors("read the outbox"), self._store.engine.connect() as conn:
            return [str(t) for t in conn.scalars(query)]

    def pending(self, limit: int = 1000) -> list[OutboxRow]:
        return self.rows(PENDING, limit)
