"""Fixtures every test folder may use: ``store`` (a migrated state database on
SQLite and on PostgreSQL) and ``pg_url`` (the test PostgreSQL server, or a skip).

PostgreSQL comes from ``VIKINGBOT_TEST_PG_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``); each test gets a schema of its
own, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from vikingbot.store.db import StateStore, mask_url

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def pg_url() -> str:
    """The test PostgreSQL URL; skips the test when the server cannot be reached."""
    url = os.environ.get("VIKINGBOT_TEST_PG_URL", DEFAULT_PG_URL)
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg not installed (uv sync --extra postgres)")
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        pytest.skip(f"PostgreSQL not reachable at {mask_url(url)}: {reason}")
    return url


def _open_pg_store(url: str) -> tuple[StateStore, str]:
    """A store in a fresh, randomly named schema; returns (store, schema)."""
    schema = f"test_{uuid.uuid4().hex[:16]}"
    return StateStore.open(url, schema=schema), schema


def _drop_pg_schema(store: StateStore, schema: str) -> None:
    with store.engine.begin() as conn:
        conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    """A migrated, empty StateStore on each backend."""
    if request.param == "sqlite":
        st = StateStore.open(f"sqlite:///{tmp_path / 'state.db'}")
        yield st
        st.close()
        return
    st, schema = _open_pg_store(request.getfixturevalue("pg_url"))
    yield st
    _drop_pg_schema(st, schema)
