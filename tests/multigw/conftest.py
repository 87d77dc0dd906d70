"""``shared_db``: one database (SQLite file or PostgreSQL schema) that several "gateways"
(stores opened separately, threads or processes) share, on each backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import SharedDb
from tests.support.databases import shared_db as make_shared_db


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SharedDb]:
    pg_url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    yield from make_shared_db(request.param, tmp_path, pg_url)


@pytest.fixture
def pg_schema(pg_url: str, tmp_path: Path) -> Iterator[SharedDb]:
    """A new PostgreSQL schema, created and migrated, dropped afterwards: what several
    gateway processes on one home share (``SharedDb.config_url`` for their config)."""
    for db in make_shared_db("postgresql", tmp_path, pg_url):
        db.open().close()
        yield db
