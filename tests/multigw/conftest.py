"""``shared_db``: one database (SQLite file or PostgreSQL schema) that several "gateways"
(stores opened separately, threads or processes) share, on each backend."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vikingbot.store.db import StateStore


@dataclass(frozen=True)
class SharedDb:
    backend: str
    url: str
    schema: str | None = None

    def open(self, **kwargs: Any) -> StateStore:
        return StateStore.open(self.url, schema=self.schema, **kwargs)


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SharedDb]:
    if request.param == "sqlite":
        yield SharedDb("sqlite", f"sqlite:///{tmp_path / 'db' / 'state.db'}")
        return
    import psycopg

    url = request.getfixturevalue("pg_url")
    schema = f"test_{uuid.uuid4().hex[:16]}"
    yield SharedDb("postgresql", url, schema)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
