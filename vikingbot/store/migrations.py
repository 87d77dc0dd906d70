"""Bringing the state database's schema up to date, with Alembic.

The revisions live in ``vikingbot/store/schema/versions/`` as ``NNNN_slug.py``
with ``revision = "NNNN"``: one straight line, numbered 0001, 0002, ... so the
schema version is still a number (``StateStore.schema_version()``).
``migrate()`` applies the missing revisions in one transaction: a failed step
leaves the database as it was, and the error names the step.

Several processes (the gateway, CLI commands) may start at once. On SQLite the
store opens the database under a file lock and the store's engine begins every
transaction with ``BEGIN IMMEDIATE``; on PostgreSQL a transaction-scoped
advisory lock serialises the upgrade. A database at a revision this vikingbot
does not know (a newer vikingbot migrated it) is refused rather than touched.

Databases made before Alembic carry a ``schema_version`` table (versions 1 and
2 of vikingbot's own runner). They are stamped with the same revision number
(``0001``/``0002``), the old table is dropped, and upgrading continues from
there. How to add a revision: docs/architecture.md ("Adding a migration").
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from vikingbot.errors import StoreError

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

SCRIPTS = Path(__file__).with_name("schema")
VERSION_TABLE = "alembic_version"
LEGACY_TABLE = "schema_version"
_REVISION_FILE = re.compile(r"^(\d{4})_\w+\.py$")

# First argument of pg_advisory_xact_lock(int, int): "vb" + "mg" in ASCII.
_PG_LOCK_CLASS = 0x76626D67


@cache
def known_versions(scripts: Path = SCRIPTS) -> tuple[int, ...]:
    """The revision numbers in ``scripts``, read from the file names (no Alembic import)."""
    found = (_REVISION_FILE.match(p.name) for p in (scripts / "versions").iterdir())
    return tuple(sorted(int(m.group(1)) for m in found if m))


LATEST_VERSION = known_versions()[-1]


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


def _revision_text(conn: Connection) -> str | None:
    """The raw revision the database is at (Alembic's or the legacy number), or None."""
    insp = inspect(conn)
    if insp.has_table(VERSION_TABLE):
        return conn.execute(text(f"SELECT max(version_num) FROM {VERSION_TABLE}")).scalar()
    if insp.has_table(LEGACY_TABLE):
        found = conn.execute(text(f"SELECT max(version) FROM {LEGACY_TABLE}")).scalar()
        return None if found is None else f"{int(found):04d}"
    return None


def current_version(conn: Connection) -> int:
    """The version the database is at; 0 for an empty database, -1 for one not ours."""
    found = _revision_text(conn)
    if found is None:
        return 0
    return int(found) if found.isdigit() else -1


def _refuse(where: str, found: str | None, latest: int) -> StoreError:
    return StoreError(
        f"{where}: database schema version {found} is newer than this vikingbot "
        f"supports ({latest:04d}); upgrade vikingbot"
    )


def migrate(engine: Engine, *, where: str, scripts: Path = SCRIPTS) -> int:
    """Bring the database to the newest revision in ``scripts``; return its number.

    ``where`` names the database in error messages (a URL with the password masked).
    Raises ``StoreError`` for a database at an unknown (newer) revision and for a
    failed step (every change of this call is rolled back).
    """
    latest = known_versions(scripts)[-1]
    with engine.connect() as conn:
        with conn.begin():
            found = _revision_text(conn)
            at_latest = found == f"{latest:04d}" and inspect(conn).has_table(VERSION_TABLE)
        if at_latest:
            return latest
        with conn.begin():
            lock(conn)
            _upgrade(conn, where, scripts, latest)
        with conn.begin():
            return current_version(conn)


def _script(scripts: Path) -> tuple[Any, ScriptDirectory]:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(scripts))
    return config, ScriptDirectory.from_config(config)


def _upgrade(conn: Connection, where: str, scripts: Path, latest: int) -> None:
    """Adopt a legacy database, refuse a newer one, apply what is missing (one transaction)."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.util.exc import CommandError

    config, script = _script(scripts)
    found = _revision_text(conn)  # again: another process may have got here first
    if found is not None:
        try:
            script.get_revision(found)
        except CommandError as exc:
            raise _refuse(where, found, latest) from exc
    if found is not None and not inspect(conn).has_table(VERSION_TABLE):
        MigrationContext.configure(conn).stamp(script, found)
        conn.exec_driver_sql(f"DROP TABLE {LEGACY_TABLE}")
        logger.info("state database {}: schema version {} adopted by Alembic", where, found)
    pending = [r for r in script.iterate_revisions("heads", found)][::-1]
    applied: list[str] = []

    def on_apply(*, step: Any, **_: Any) -> None:
        applied.append(step.up_revision_id)
        logger.info("state database {}: applied migration {} ({})", where, *_describe(step))

    config.attributes["connection"] = conn
    config.attributes["on_version_apply"] = on_apply
    try:
        command.upgrade(config, "heads")
    except (SQLAlchemyError, CommandError, ValueError, TypeError) as exc:
        failed = next((r for r in pending if r.revision not in applied), None)
        step = f"migration {failed.revision} ({_doc(failed.doc)})" if failed else "migration"
        raise StoreError(f"{where}: {step} failed: {exc}") from exc


def _doc(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0].rstrip(".") if doc else ""


def _describe(step: Any) -> tuple[str, str]:
    revision = step.up_revision
    return step.up_revision_id, _doc(revision.doc if revision is not None else None)
