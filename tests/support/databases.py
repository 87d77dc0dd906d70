"""One state database on each backend that a test may open several times.

``SharedDb`` names a SQLite file or a PostgreSQL schema; ``open()`` gives a new
``StateStore`` on it each call (threads, processes or "several gateways" sharing
one database). ``shared_db(backend, tmp_path, pg_url)`` yields one and drops the
PostgreSQL schema afterwards; the pytest fixtures (``target`` in tests/store,
``shared_db`` in tests/multigw) are built on it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vikingbot.store.db import StateStore


@dataclass(frozen=True)
class SharedDb:
    backend: str
    url: str
    schema: str | None = None

    def open(self, **kwargs: Any) -> StateStore:
        return StateStore.open(self.url, schema=self.schema, **kwargs)

    @property
    def config_url(self) -> str:
        """What a gateway's ``storage.database_url`` says to use this database (the
        schema as the connection's search path); the schema must exist (``open()``)."""
        if self.schema is None:
            return self.url
        return f"{self.url}?options=-csearch_path%3D{self.schema}"


def shared_db(backend: str, tmp_path: Path, pg_url: str | None = None) -> Iterator[SharedDb]:
    """A fresh database: a file under ``tmp_path``, or a new schema on ``pg_url``."""
    if backend == "sqlite":
        yield SharedDb("sqlite", f"sqlite:///{tmp_path / 'db' / 'state.db'}")
        return
    import psycopg

    assert pg_url is not None, "PostgreSQL needs the server's URL"
    schema = f"test_{uuid.uuid4().hex[:16]}"
    yield SharedDb("postgresql", pg_url, schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
