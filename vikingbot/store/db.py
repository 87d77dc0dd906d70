"""The state database: opening it (SQLite or PostgreSQL), migrating it, the audit log.

``StateStore.open(url)`` turns a ``sqlite:///PATH`` or ``postgresql://...`` URL
into a SQLAlchemy Core engine, brings the schema up to date and returns the
store. Other services use ``store.engine`` with the tables in
``vikingbot.store.tables``; the audit log has its own two methods here.

SQLite is opened for several processes at once (the gateway and CLI commands):
WAL journal, foreign keys on, a busy timeout, and every transaction starts with
``BEGIN IMMEDIATE`` so a writer waits for the lock instead of failing halfway.
Keep transactions short. A connection may be used from worker threads.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loguru import logger
from sqlalchemy import Connection, Engine, create_engine, event, select
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from vikingbot import redact
from vikingbot.clock import Clock, SystemClock
from vikingbot.errors import StoreError
from vikingbot.store import migrations
from vikingbot.store.tables import audit_events

BUSY_TIMEOUT_MS = 30_000
PG_CONNECT_TIMEOUT_S = 10
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def _install_hint() -> str:
    """The command that adds the postgres extra and keeps the others (vikingbot.extras)."""
    from vikingbot.extras import hint

    return hint("postgres")


def mask_url(url: URL | str) -> str:
    """The URL as text with any password replaced by ``***``."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    return redact.mask_url(url)


def upsert_insert(dialect: str, table: Any) -> Any:
    """``INSERT`` on ``table`` with ``ON CONFLICT`` support for this database
    (``dialect``: ``"postgresql"``, else SQLite), for ``on_conflict_do_nothing`` /
    ``on_conflict_do_update`` and ``.excluded``."""
    if dialect == "postgresql":  # each dialect imported only where it is used
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)

    return sqlite.insert(table)


def _json_dumps(value: Any) -> str:
    # Audit details may carry paths or datetimes; record them as text, never fail.
    return json.dumps(value, ensure_ascii=False, default=str)


def _reason(exc: BaseException, url: URL) -> str:
    """A one-line reason from a driver error, with the password scrubbed."""
    text = str(exc.orig) if isinstance(exc, DBAPIError) and exc.orig is not None else str(exc)
    text = " ".join(text.split())
    if url.password:
        text = text.replace(str(url.password), "***")
    return text


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(
            f"bad database URL {mask_url(url)!r}: expected sqlite:///PATH or "
            "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
        ) from exc
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(
            f"unsupported database URL {mask_url(parsed)!r}: expected sqlite:///PATH or "
            "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
        )
    if backend == "postgresql" and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def _sqlite_engine(url: URL) -> Engine:
    database = url.database or ""
    in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
    if not in_memory:
        path = Path(database)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder for the state database {path}: {exc.strerror or exc}"
            ) from exc
    kwargs: dict[str, Any] = {
        "connect_args": {"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000},
        "json_serializer": _json_dumps,
    }
    if in_memory:
        kwargs["poolclass"] = StaticPool  # one shared connection, or every thread sees its own db
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see _on_begin)
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if not in_memory:
                # WAL (set once, under the open lock: see _open_lock) + NORMAL: a crash of
                # the process loses nothing committed; only a power cut may lose the last
                # commits. Saves an fsync per transaction.
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # IMMEDIATE takes the write lock up front (waiting up to the busy timeout), so a
        # transaction that reads and then writes cannot fail with "database is locked".
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _postgres_engine(url: URL, schema: str | None) -> Engine:
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    if schema is not None:
        connect_args["options"] = f"-c search_path={schema}"
    try:
        return create_engine(
            url, connect_args=connect_args, json_serializer=_json_dumps, pool_pre_ping=True
        )
    except ImportError as exc:
        raise StoreError(
            f"PostgreSQL support is not installed (needed for {mask_url(url)}): {_install_hint()}"
        ) from exc


class StateStore:
    """An open state database. Thread-safe; share one per process."""

    def __init__(
        self, engine: Engine, *, clock: Clock | None = None, name: str | None = None
    ) -> None:
        self.engine = engine
        self.clock: Clock = clock or SystemClock()
        self.url = name or mask_url(engine.url)  # for messages: password masked

    @classmethod
    def open(
        cls,
        url: str,
        *,
        schema: str | None = None,
        clock: Clock | None = None,
    ) -> StateStore:
        """Open (creating if needed) and migrate the database at ``url``.

        ``schema`` (PostgreSQL only) keeps every table in that schema, created if
        missing; tests use it to give each test a database of its own.
        ``clock`` stamps audit events (default: the system clock).
        """
        parsed = _parse(url)
        where = mask_url(url) + (f" (schema {schema})" if schema else "")
        if schema is not None:
            if parsed.get_backend_name() != "postgresql":
                raise StoreError(f"{where}: schema= is only supported on PostgreSQL")
            if not _SCHEMA_NAME.match(schema):
                raise StoreError(f"{where}: bad schema name {schema!r} (letters, digits, _)")
        if parsed.get_backend_name() == "sqlite":
            engine = _sqlite_engine(parsed)
        else:
            engine = _postgres_engine(parsed, schema)
        try:
            with _open_lock(parsed, where):
                if schema is not None:
                    _create_schema(engine, schema)
                _use_wal(engine)
                migrations.migrate(engine, where=where)
        except StoreError:
            engine.dispose()
            raise
        except SQLAlchemyError as exc:
            engine.dispose()
            raise StoreError(
                f"cannot open the state database at {where}: {_reason(exc, parsed)}"
            ) from exc
        logger.debug("state database open: {}", where)
        return cls(engine, clock=clock, name=where)

    @property
    def backend(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self.engine.dialect.name

    def schema_version(self) -> int:
        with self._failures("read the schema version"), self.engine.connect() as conn:
            return migrations.current_version(conn)

    def audit(
        self,
        actor: str,
        action: str,
        subject: str,
        outcome: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Record who did what to what, how it ended and why.

        Over-long texts are shortened to the column size rather than refused: an
        audit record must not be lost because a target string was huge.
        """
        row = {
            "at": self.clock.now(),
            "actor": _fit(actor, audit_events.c.actor.type),
            "action": _fit(action, audit_events.c.action.type),
            "subject": _fit(subject, audit_events.c.subject.type),
            "outcome": _fit(outcome, audit_events.c.outcome.type),
            "reason": reason,
            "details": details,
        }
        with self._failures(f"write audit event {action}"), self.engine.begin() as conn:
            conn.execute(audit_events.insert().values(**row))

    def audit_events(self, limit: int = 100, action: str | None = None) -> list[dict[str, Any]]:
        """The newest audit events first, optionally only one ``action``."""
        query = select(audit_events).order_by(audit_events.c.at.desc(), audit_events.c.id.desc())
        if action is not None:
            query = query.where(audit_events.c.action == action)
        query = query.limit(limit)
        with self._failures("read audit events"), self.engine.connect() as conn:
            return [dict(row) for row in conn.execute(query).mappings()]

    def close(self) -> None:
        """Close every pooled connection. Safe to call twice."""
        self.engine.dispose()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StateStore({self.url!r})"

    @contextmanager
    def _failures(self, doing: str) -> Iterator[None]:
        """Turn SQLAlchemy errors into ``StoreError`` naming the database and the task."""
        try:
            yield
        except SQLAlchemyError as exc:
            reason = _reason(exc, self.engine.url)
            raise StoreError(f"state database {self.url}: cannot {doing}: {reason}") from exc


def _fit(text: str, column_type: Any) -> str:
    length = getattr(column_type, "length", None)
    if length is None or len(text) <= length:
        return text
    return text[: length - 1] + "…"


def _sqlite_file(url: URL) -> str | None:
    """The path of a SQLite database file, or None (in memory, a URI, not SQLite)."""
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    return None if database.startswith("file:") else database


@contextmanager
def _open_lock(url: URL, where: str) -> Iterator[None]:
    """Serialise opening one SQLite file between threads and processes.

    Switching a file to WAL needs an exclusive lock that SQLite does not always
    wait for, and the first open migrates: both happen under ``<file>.lock``.
    PostgreSQL needs nothing here (the migration takes an advisory lock).
    """
    path = _sqlite_file(url)
    if path is None:
        yield
        return
    from filelock import FileLock, Timeout  # lazy: heavy to import; only an opening store needs it

    try:
        with FileLock(f"{path}.lock", timeout=BUSY_TIMEOUT_MS / 1000):
            yield
    except Timeout as exc:
        raise StoreError(f"{where}: another process held the open lock for too long") from exc


def _use_wal(engine: Engine) -> None:
    """Put a SQLite file in WAL mode (kept in the file; a no-op once it is).

    Run on the raw connection: the mode cannot change inside a transaction, and
    the engine begins one for every statement.
    """
    if _sqlite_file(engine.url) is None:
        return
    with engine.connect() as conn:  # connect errors arrive as SQLAlchemy errors
        raw = conn.connection.driver_connection
        assert raw is not None
        try:
            mode = raw.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                raw.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot open the state database at {mask_url(engine.url)}: {exc}"
            ) from exc


def _create_schema(engine: Engine, schema: str) -> None:
    with engine.begin() as conn:
        migrations.lock(conn)
        conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
