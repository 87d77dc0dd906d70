"""``target``: one database (SQLite file or PostgreSQL schema) that a test may open
several times, from several threads or processes, on each backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import SharedDb, shared_db

Target = SharedDb


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SharedDb]:
    pg_url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    yield from shared_db(request.param, tmp_path, pg_url)
