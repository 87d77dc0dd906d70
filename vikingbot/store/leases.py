"""Leases: one claimant at a time for a unit of work, across gateways sharing a database.

A lease is a row in ``leases`` keyed by the unit (``hb:<workspace>:<entry>[:<slot>]``,
``cron:<job>:<slot>``, ``channel:telegram:default``, ...). ``claim`` hands out a
``Claim`` to one owner until ``expires_at``; everyone else gets ``Held``. When a
holder dies its lease expires and the next claimant takes over with a higher
``fence``. On SQLite (one machine) a claim whose holder is a process of this machine
that no longer exists (``<hostname>:<pid>``, the heartbeat's owners) is taken over at
once: a gateway killed mid-turn does not keep its units busy after a restart.
Results of a unit are written inside ``fenced(claim)``, which checks the
fence under the row lock, so a late finisher (its lease expired while its turn still
ran and another gateway took the unit) cannot overwrite the newer claimant's result.
``mark_done`` closes a key for good: a slot that fired never fires again, whoever
asks and however late.

One ``Leases`` for both backends. Every operation is a short transaction:
SQLite serialises them with ``BEGIN IMMEDIATE`` (the store's engine), so a claim
there is one prepared upsert; PostgreSQL inserts with ``ON CONFLICT DO NOTHING``
and locks the one existing row with ``SELECT ... FOR UPDATE`` (``claim`` uses
``SKIP LOCKED``: a row another claimant is deciding about right now is reported
as ``Held`` rather than waited for). The statements on every unit's path (the
SQLite claim, renew, release, mark_done) are built once: building one cost more
than running it.

Time. On PostgreSQL expiry is judged by the database's clock
(``clock_timestamp()``), so gateways on machines whose clocks disagree by seconds
still agree on who holds what. On SQLite every process shares one machine and its
clock, and the injected ``Clock`` is used (tests set it). ``time_source`` overrides
the choice (tests use ``"clock"`` on PostgreSQL to move time by hand).
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, and_, bindparam, delete, select, update
from sqlalchemy.dialects import sqlite  # postgresql's: where used (SQLite never needs it)

from vikingbot.clock import Clock
from vikingbot.errors import StoreError
from vikingbot.store.db import StateStore
from vikingbot.store.tables import leases

TimeSource = Literal["database", "clock"]

KEY_MAX = 400
_KEY_KEEP = 300  # a longer key keeps this much of its text plus a digest of the whole
OWNER_MAX = 200


def default_owner() -> str:
    """Who a claim names: this host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


class LeaseLost(StoreError):
    """The claim's fence is no longer the key's newest: another claimant took over."""


@dataclass(frozen=True)
class Claim:
    """This owner holds ``key`` until ``expires_at`` (in the lease time source's frame).

    ``stamp`` is ``Leases.stamp()`` read before the claim's transaction began: the
    expiry was set later than that, so while ``Leases.stamp() - stamp`` is below
    the ttl the claim is provably still this owner's (``Fence`` in the heartbeat
    relies on it instead of asking the database).
    """

    key: str
    owner: str
    fence: int
    expires_at: datetime
    stamp: float = 0.0


@dataclass(frozen=True)
class Held:
    """Someone else holds ``key`` (or, with ``done``, its unit already fired)."""

    key: str
    holder: str
    expires_at: datetime
    done: bool = False


def lease_key(key: str) -> str:
    """``key`` as stored: keys longer than ``KEY_MAX`` keep a prefix plus a digest.

    Total: any string maps to a key that fits the column, distinct keys stay distinct
    (up to SHA-256 collisions).
    """
    if len(key) <= KEY_MAX:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{key[:_KEY_KEEP]}#{digest}"


def _owner(owner: str) -> str:
    if not owner:
        raise ValueError("a lease owner must be a non-empty string")
    return owner[:OWNER_MAX]


def _ttl(ttl_s: float) -> timedelta:
    if not ttl_s > 0:  # also refuses NaN
        raise ValueError(f"a lease ttl must be a positive number of seconds, got {ttl_s!r}")
    return timedelta(seconds=ttl_s)


class Leases:
    """Claims on keys in one state database. Thread-safe; share one per process."""

    def __init__(
        self, store: StateStore, clock: Clock, *, time_source: TimeSource | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        self.time_source: TimeSource = time_source or default_time_source(store)
        self._postgres = store.backend == "postgresql"

    # ------------------------------------------------------------------ claiming

    def claim(self, key: str, owner: str, ttl_s: float) -> Claim | Held:
        """Take ``key`` for ``owner`` for ``ttl_s`` seconds, unless someone holds it.

        Returns ``Held`` when another live claim exists, when ``owner`` itself already
        holds it (a second claim by the same owner is not a new unit of work), and when
        the key is done (``Held.done``). An expired claim is taken over with the fence
        raised by one.
        """
        stored = lease_key(key)
        stamp = self.stamp()
        with self._tx(f"claim lease {stored!r}") as conn:
            return self.claim_in(conn, stored, owner, ttl_s, stamp)

    def claim_in(
        self, conn: Connection, key: str, owner: str, ttl_s: float, stamp: float
    ) -> Claim | Held:
        """``claim`` inside a transaction the caller holds. ``stamp`` is ``stamp()`` read
        before the transaction's first statement about this key was sent."""
        stored, who, ttl = lease_key(key), _owner(owner), _ttl(ttl_s)
        now = self._now(conn)
        expires = now + ttl
        row = {
            "key": stored,
            "owner": who,
            "fence": 1,
            "acquired_at": now,
            "expires_at": expires,
        }
        if not self._postgres:
            return self._claim_one_statement(conn, row, stamp)
        from sqlalchemy.dialects import postgresql

        inserted = conn.execute(
            postgresql.insert(leases).values(**row).on_conflict_do_nothing().returning(leases.c.key)
        ).first()
        if inserted is not None:
            return Claim(stored, who, 1, expires, stamp)
        query = select(leases).where(leases.c.key == stored).with_for_update(skip_locked=True)
        current = conn.execute(query).mappings().first()
        if current is None:  # locked by a claimant deciding right now
            return self._held_unlocked(conn, stored)
        if current["done_at"] is not None or current["expires_at"] > now:
            return _held(current)
        fence = int(current["fence"]) + 1
        conn.execute(
            update(leases)
            .where(leases.c.key == stored)
            .values(owner=who, fence=fence, acquired_at=now, expires_at=expires)
        )
        return Claim(stored, who, fence, expires, stamp)

    def _claim_one_statement(
        self, conn: Connection, row: dict[str, Any], stamp: float
    ) -> Claim | Held:
        """SQLite: insert, or take over an expired claim, in one upsert.

        The transaction already holds the database's write lock (``BEGIN
        IMMEDIATE``), so nobody decides about the row meanwhile; one prepared
        statement instead of insert, select and update keeps a claim cheap (a
        cycle claims every unit it runs: bench/lease_overhead.py).
        """
        taken = _sent(conn, _SQLITE_CLAIM, row).scalar_one_or_none()
        if taken is not None:
            return Claim(row["key"], row["owner"], int(taken), row["expires_at"], stamp)
        current = conn.execute(select(leases).where(leases.c.key == row["key"])).mappings().one()
        if current["done_at"] is None and _holder_died_here(current["owner"]):
            fence = int(current["fence"]) + 1
            conn.execute(
                update(leases)
                .where(leases.c.key == row["key"])
                .values(
                    owner=row["owner"],
                    fence=fence,
                    acquired_at=row["acquired_at"],
                    expires_at=row["expires_at"],
                )
            )
            return Claim(row["key"], row["owner"], fence, row["expires_at"], stamp)
        return _held(current)

    def renew(self, claim: Claim, ttl_s: float) -> bool:
        """Extend ``claim`` to ``ttl_s`` seconds from now; ``False`` when it was lost.

        A claim that expired but was not taken over by anyone is still renewed: its
        fence is still the newest, so nothing it writes can clash.
        """
        ttl = _ttl(ttl_s)
        with self._tx(f"renew lease {claim.key!r}") as conn:
            expires = self._now(conn) + ttl
            done = _sent(conn, _SET_EXPIRY, {**_claim_params(claim), "b_at": expires}).rowcount
        return bool(done == 1)

    def renew_all(self, claims: list[Claim], ttl_s: float) -> set[str]:
        """``renew`` every claim in one transaction; the keys of those still held.

        Stamp (``stamp()``) before calling: the new expiries are later than that.
        """
        ttl = _ttl(ttl_s)
        if not claims:
            return set()
        kept = set()
        with self._tx(f"renew {len(claims)} leases") as conn:
            expires = self._now(conn) + ttl
            for claim in claims:
                params = {**_claim_params(claim), "b_at": expires}
                if _sent(conn, _SET_EXPIRY, params).rowcount == 1:
                    kept.add(claim.key)
        return kept

    def stamp(self) -> float:
        """Seconds on a clock that runs at the rate expiries are judged by: the
        monotonic clock when the database judges (its clock's offset from this
        machine's does not matter for a difference), the injected clock otherwise
        (tests move it by hand). Only differences of two stamps mean anything."""
        if self.time_source == "database":
            return time.monotonic()
        return self.clock.now().timestamp()

    def release(self, claim: Claim) -> None:
        """Give ``key`` up now (others may claim it at once). No-op if already lost."""
        with self._tx(f"release lease {claim.key!r}") as conn:
            self.release_in(conn, claim)

    def release_in(self, conn: Connection, claim: Claim) -> None:
        """``release`` inside a transaction the caller holds (with the unit's results)."""
        _sent(conn, _SET_EXPIRY, {**_claim_params(claim), "b_at": self._now(conn)})

    def mark_done(self, claim: Claim) -> bool:
        """Close ``claim.key`` for good; ``False`` if the claim was lost before."""
        with self._tx(f"mark lease {claim.key!r} done") as conn:
            return self.mark_done_in(conn, claim)

    def mark_done_in(self, conn: Connection, claim: Claim) -> bool:
        """``mark_done`` inside a transaction the caller holds (e.g. ``fenced``'s)."""
        found = _sent(conn, _DONE, {**_claim_params(claim), "b_at": self._now(conn)}).rowcount
        return bool(found == 1)

    @contextmanager
    def fenced(self, claim: Claim) -> Iterator[Connection]:
        """A transaction in which ``claim`` is verified to still be the newest claim.

        Write the unit's results on the yielded connection; they commit together.
        The lease row stays locked until then, so no one can take over in between.
        Raises ``LeaseLost`` (before anything is written) when another claimant has
        taken the key since.
        """
        with self._tx(f"write under lease {claim.key!r}") as conn:
            query = select(leases.c.owner, leases.c.fence).where(leases.c.key == claim.key)
            if self._postgres:
                query = query.with_for_update()
            row = conn.execute(query).first()
            if row is None or (row.owner, row.fence) != (claim.owner, claim.fence):
                holder = "nobody" if row is None else f"{row.owner} (fence {row.fence})"
                raise LeaseLost(
                    f"lease {claim.key!r} of {claim.owner} (fence {claim.fence}) was lost: "
                    f"now held by {holder}; result not written"
                )
            yield conn

    # ------------------------------------------------------------------ reading

    def holder(self, key: str) -> Held | None:
        """Who holds ``key`` now (``Held.done`` for a done key); ``None`` when free."""
        stored = lease_key(key)
        with self._tx(f"read lease {stored!r}", write=False) as conn:
            now = self._now(conn)
            row = conn.execute(select(leases).where(leases.c.key == stored)).mappings().first()
        if row is None or (row["done_at"] is None and row["expires_at"] <= now):
            return None
        return _held(row)

    def done(self, key: str) -> bool:
        """Whether ``key``'s unit has fired (``mark_done``)."""
        stored = lease_key(key)
        with self._tx(f"read lease {stored!r}", write=False) as conn:
            found = conn.execute(
                select(leases.c.done_at).where(leases.c.key == stored)
            ).scalar_one_or_none()
        return found is not None

    def holders(self, prefix: str) -> list[Held]:
        """Live (not expired, not done) claims on keys starting with ``prefix``, by key."""
        with self._tx("list leases", write=False) as conn:
            now = self._now(conn)
            rows = conn.execute(
                select(leases)
                .where(
                    and_(
                        leases.c.key.startswith(prefix, autoescape=True),
                        leases.c.done_at.is_(None),
                        leases.c.expires_at > now,
                    )
                )
                .order_by(leases.c.key)
            ).mappings()
            return [_held(r) for r in rows]

    def prune(self, older_than_s: float) -> int:
        """Delete leases expired (or done) more than ``older_than_s`` seconds ago.

        Housekeeping keeps the table small. A pruned done key could be claimed again,
        so keep ``older_than_s`` well beyond how late a slot may still be asked for.
        """
        keep = _ttl(older_than_s)
        with self._tx("prune leases") as conn:
            cutoff = self._now(conn) - keep
            return int(conn.execute(delete(leases).where(leases.c.expires_at < cutoff)).rowcount)

    def now(self) -> datetime:
        """The current time in this lease table's time source."""
        with self._tx("read the database clock", write=False) as conn:
            return self._now(conn)

    # ------------------------------------------------------------------ internals

    def _now(self, conn: Connection) -> datetime:
        return store_now(conn, self.clock, self.time_source)

    def _held_unlocked(self, conn: Connection, key: str) -> Held:
        row = conn.execute(select(leases).where(leases.c.key == key)).mappings().first()
        if row is None:  # inserted by a transaction not yet committed
            return Held(key, "(being claimed)", self._now(conn))
        return _held(row)

    def transaction(self, doing: str) -> AbstractContextManager[Connection]:
        """A write transaction for several ``*_in`` calls at once (``doing`` names it in
        the error when the database fails)."""
        return self._tx(doing)

    @contextmanager
    def _tx(self, doing: str, *, write: bool = True) -> Iterator[Connection]:
        opening = self.store.engine.begin() if write else self.store.engine.connect()
        with self.store._failures(doing), opening as conn:
            yield conn


def default_time_source(store: StateStore) -> TimeSource:
    """The database's clock on PostgreSQL, the injected clock on SQLite."""
    return "database" if store.backend == "postgresql" else "clock"


def store_now(conn: Connection, clock: Clock, time_source: TimeSource) -> datetime:
    """Now, for judging leases: ``clock`` or the database's clock (see the module doc).

    Anything else that keeps lease-like columns (the outbox's ``lease_until``) uses
    this too, so every expiry in the database is judged by one clock.
    """
    if time_source == "clock":
        return clock.now()
    if conn.dialect.name != "postgresql":  # SQLite: the machine's clock, one per process set
        return datetime.now(UTC)
    found = conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one()
    if not isinstance(found, datetime) or found.tzinfo is None:
        raise StoreError(f"the database clock returned {found!r}, not a timestamp")
    return found.astimezone(UTC)


# Built once (a claim is on every heartbeat unit's path): insert the row, or take
# over the key's expired, not done claim with the fence raised by one.
_SQLITE_CLAIM = (
    sqlite.insert(leases)
    .values(
        key=bindparam("key"),
        owner=bindparam("owner"),
        fence=1,
        acquired_at=bindparam("acquired_at"),
        expires_at=bindparam("expires_at"),
    )
    .on_conflict_do_update(
        index_elements=[leases.c.key],
        set_={
            "owner": bindparam("owner"),
            "fence": leases.c.fence + 1,
            "acquired_at": bindparam("acquired_at"),
            "expires_at": bindparam("expires_at"),
        },
        where=and_(leases.c.done_at.is_(None), leases.c.expires_at <= bindparam("acquired_at")),
    )
    .returning(leases.c.fence)
)


# Built once too (every unit renews, releases or closes its claim): statements on a
# claim that is still this one (same key, owner and fence, not done).
_THIS_CLAIM = and_(
    leases.c.key == bindparam("b_key"),
    leases.c.owner == bindparam("b_owner"),
    leases.c.fence == bindparam("b_fence"),
    leases.c.done_at.is_(None),
)
_SET_EXPIRY = update(leases).where(_THIS_CLAIM).values(expires_at=bindparam("b_at"))
_DONE = (
    update(leases)
    .where(_THIS_CLAIM)
    .values(done_at=bindparam("b_at"), expires_at=bindparam("b_at"))
)


class _Prepared:
    """A statement compiled once for a dialect that takes positional parameters
    (SQLite's), sent with ``exec_driver_sql``: SQLAlchemy's work per execution of a
    Core statement (caching, binding, typing the result) cost several times the
    statement itself on SQLite, and these run for every heartbeat unit
    (bench/lease_overhead.py). Datetimes are encoded by the column type's own bind
    processor, so the rows are stored exactly as Core would store them."""

    def __init__(self, stmt: Any, dialect: Any) -> None:
        compiled = stmt.compile(dialect=dialect)
        self.sql: str = compiled.string
        self.names: list[str] = list(compiled.positiontup or ())
        self.fixed: dict[str, Any] = dict(compiled.params)  # literals in the statement
        self.encode = leases.c.expires_at.type.bind_processor(dialect)

    def params(self, values: dict[str, Any]) -> tuple[Any, ...]:
        encode = self.encode
        fixed = self.fixed
        ordered = [values[name] if name in values else fixed[name] for name in self.names]
        if encode is None:
            return tuple(ordered)
        return tuple(encode(v) if isinstance(v, datetime) else v for v in ordered)


_prepared: dict[tuple[int, str], _Prepared] = {}


def _sent(conn: Connection, stmt: Any, values: dict[str, Any]) -> Any:
    """``conn.execute(stmt, values)``; on SQLite through ``_Prepared``."""
    dialect = conn.dialect
    if dialect.paramstyle != "qmark":
        return conn.execute(stmt, values)
    key = (id(stmt), dialect.name)
    prepared = _prepared.get(key)
    if prepared is None:
        prepared = _prepared[key] = _Prepared(stmt, dialect)
    return conn.exec_driver_sql(prepared.sql, prepared.params(values))


def _holder_died_here(owner: str) -> bool:
    """Whether ``owner`` names a process of this machine (``<hostname>:<pid>``, as the
    heartbeat's claims do) that is gone: its claim need not wait out its expiry.

    Only asked on SQLite, where every claimant shares this machine. A pid that
    exists (also one reused by an unrelated process) counts as alive: the claim
    then expires as usual.
    """
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or not 0 < int(pid) < 2**22:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _claim_params(claim: Claim) -> dict[str, Any]:
    return {"b_key": claim.key, "b_owner": claim.owner, "b_fence": claim.fence}


def _held(row: Any) -> Held:
    done = row["done_at"] is not None
    return Held(row["key"], row["owner"], row["expires_at"], done=done)
