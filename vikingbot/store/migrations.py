"""The versioned schema of the state database and the code that brings it up to date.

``MIGRATIONS`` is an ordered list; each step has a version (1, 2, 3, ...), a
description and a function that receives a ``Connection`` already inside that
step's transaction. ``migrate()`` applies the missing steps in order, one
transaction per step, and records each in the ``schema_version`` table, so a
failed step leaves the database at the previous version.

Several processes (the gateway, CLI commands) may start at once. Every step
re-reads the version under a lock before running: ``BEGIN IMMEDIATE`` on SQLite
(the store's engine begins every transaction that way), a transaction-scoped
advisory lock on PostgreSQL. A database newer than the newest step known here
is refused rather than touched.

Adding a migration (version N):

1. change ``tables.py`` (new table or column);
2. append ``Migration(N, "...", _fn)`` to ``MIGRATIONS``. Migration 1 builds tables
   from the current ``tables.py``, so on a fresh database a new column already
   exists when step N runs: a step must be a no-op for a change that is already
   there (``create_tables`` and ``add_column`` below check first; raw DDL uses
   ``IF NOT EXISTS``). Steps run inside a transaction, so nothing that refuses one
   (PostgreSQL's ``CREATE INDEX CONCURRENTLY``);
3. record the new schema in ``tests/store/test_store_migrations.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from loguru import logger
from sqlalchemy import Column, Connection, Engine, Integer, MetaData, String, Table, func, inspect
from sqlalchemy import select as sa_select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.schema import CreateColumn

from vikingbot.errors import StoreError
from vikingbot.store import tables as t
from vikingbot.store.types import UtcDateTime

# Bookkeeping lives on its own MetaData: it is not part of the application schema.
_bookkeeping = MetaData()
schema_version_table = Table(
    "schema_version",
    _bookkeeping,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", String(200), nullable=False),
    Column("applied_at", UtcDateTime(), nullable=False),
)

# First argument of pg_advisory_xact_lock(int, int): "vb" + "mg" in ASCII.
_PG_LOCK_CLASS = 0x76626D67


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


# ---------------------------------------------------------------- helpers for steps


def create_tables(conn: Connection, *tables: Table) -> None:
    """Create the given tables (with their indexes) unless they exist."""
    for table in tables:
        table.create(conn, checkfirst=True)


def add_column(conn: Connection, table: Table, column_name: str) -> None:
    """Add ``table.c[column_name]`` to an existing table unless it is already there."""
    existing = {c["name"] for c in inspect(conn).get_columns(table.name)}
    if column_name in existing:
        return
    ddl = CreateColumn(table.c[column_name]).compile(dialect=conn.dialect)
    conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {ddl}")


# ---------------------------------------------------------------- the steps


def _initial_schema(conn: Connection) -> None:
    create_tables(
        conn,
        t.audit_events,
        t.heartbeat_runs,
        t.heartbeat_entries,
        t.heartbeat_workspaces,
        t.notices,
        t.outbox,
        t.inbox,
        t.cron_jobs,
        t.history_docs,
        t.history_cursor,
    )


_HISTORY_FTS_SQLITE = (
    # External-content FTS5 table over history_docs(content); rowid = history_docs.id.
    "CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5("
    "content, content='history_docs', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')",
    # Triggers keep it in step with history_docs on insert, delete and update.
    "CREATE TRIGGER IF NOT EXISTS history_docs_fts_ai AFTER INSERT ON history_docs BEGIN "
    "INSERT INTO history_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER IF NOT EXISTS history_docs_fts_ad AFTER DELETE ON history_docs BEGIN "
    "INSERT INTO history_fts(history_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "END",
    "CREATE TRIGGER IF NOT EXISTS history_docs_fts_au AFTER UPDATE ON history_docs BEGIN "
    "INSERT INTO history_fts(history_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "INSERT INTO history_fts(rowid, content) VALUES (new.id, new.content); END",
    # Rows indexed before this step (none on a fresh database) enter the index too.
    "INSERT INTO history_fts(history_fts) VALUES ('rebuild')",
)

_HISTORY_FTS_POSTGRES = (
    "CREATE INDEX IF NOT EXISTS ix_history_docs_fts ON history_docs "
    "USING GIN (to_tsvector('simple', content))",
)


def _history_fts(conn: Connection) -> None:
    """Full-text search over history_docs: FTS5 on SQLite, a GIN index on PostgreSQL.

    Queries live in ``vikingbot.housekeeping.search``; on PostgreSQL they must use
    the same expression, ``to_tsvector('simple', content)``, to hit the index.
    """
    postgres = conn.dialect.name == "postgresql"
    for sql in _HISTORY_FTS_POSTGRES if postgres else _HISTORY_FTS_SQLITE:
        conn.exec_driver_sql(sql)


def _leases(conn: Connection) -> None:
    create_tables(conn, t.leases)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "initial schema: audit, heartbeat ledger and state, outbox, inbox, cron, history",
        _initial_schema,
    ),
    Migration(2, "full-text search over session history (history_docs)", _history_fts),
    Migration(3, "leases: claims on units of work shared by several gateways", _leases),
)

LATEST_VERSION = MIGRATIONS[-1].version


# ---------------------------------------------------------------- applying


def check_sequence(migrations: Sequence[Migration]) -> None:
    """Versions must be 1, 2, 3, ... with no gap (a programming error otherwise)."""
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migration versions must be 1..N without gaps, got {versions}")


def lock(conn: Connection) -> None:
    """Serialise schema changes between processes for the current transaction.

    On SQLite the store's engine already opened the transaction with
    ``BEGIN IMMEDIATE``, which holds the write lock; nothing more is needed.
    On PostgreSQL, take an advisory lock keyed by the connection's search_path,
    so stores in different schemas do not wait for each other.
    """
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "SELECT pg_advisory_xact_lock(%(cls)s, hashtext(current_setting('search_path')))",
            {"cls": _PG_LOCK_CLASS},
        )


def current_version(conn: Connection) -> int:
    """The version the database is at; 0 for an empty database."""
    if not inspect(conn).has_table(schema_version_table.name):
        return 0
    found = conn.execute(sa_select(func.max(schema_version_table.c.version))).scalar()
    return int(found or 0)


def _refuse_newer(version: int, latest: int, where: str) -> None:
    if version > latest:
        raise StoreError(
            f"{where}: database schema version {version} is newer than this vikingbot "
            f"supports ({latest}); upgrade vikingbot"
        )


def migrate(engine: Engine, migrations: Sequence[Migration] = MIGRATIONS, *, where: str) -> int:
    """Bring the database to the newest version in ``migrations``; return that version.

    ``where`` names the database in error messages (a URL with the password masked).
    Raises ``StoreError`` for a database newer than ``migrations`` and for a failed
    step (that step's changes are rolled back).
    """
    check_sequence(migrations)
    latest = migrations[-1].version if migrations else 0
    with engine.connect() as conn:
        with conn.begin():
            version = current_version(conn)
        _refuse_newer(version, latest, where)
        for step in migrations:
            if step.version <= version:
                continue
            with conn.begin():
                lock(conn)
                create_tables(conn, schema_version_table)
                version = current_version(conn)  # another process may have got here first
                _refuse_newer(version, latest, where)
                if step.version <= version:
                    continue
                try:
                    step.apply(conn)
                except (SQLAlchemyError, ValueError, TypeError) as exc:
                    raise StoreError(
                        f"{where}: migration {step.version} ({step.description}) failed: {exc}"
                    ) from exc
                conn.execute(
                    schema_version_table.insert().values(
                        version=step.version,
                        description=step.description[:200],
                        applied_at=datetime.now(UTC),
                    )
                )
                version = step.version
            logger.info(
                "state database {}: applied migration {} ({})",
                where,
                step.version,
                step.description,
            )
    return version
