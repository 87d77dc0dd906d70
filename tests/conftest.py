"""Fixtures every test folder may use: ``store`` (a migrated, empty state database on
SQLite and on PostgreSQL) and ``pg_url`` (the test PostgreSQL server, or a skip).

PostgreSQL comes from ``VIKINGBOT_TEST_PG_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``). Creating the schema costs far more
than a test, so each test session migrates one schema of its own and empties its
tables after every test (a test that changes the schema gets a fresh one next).
SQLite tests get a copy of a database migrated once per session.

Child processes (gateways, CLI commands) keep their compiled byte-code in one
cache folder even when ``PYTHONDONTWRITEBYTECODE`` is set (see
``_share_bytecode_cache``), and the xdist workers take the test files most
costly first (``tests/file_order.py``). Test gateways are forked from a process that
has imported them already (``tests/support/forkserver.py``; set
``VIKINGBOT_TEST_FORK=0`` to start each as a new interpreter).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.file_order import Recorder, sort_items
from vikingbot.store.db import StateStore, mask_url

if TYPE_CHECKING:
    from sqlalchemy import Connection

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def pytest_configure(config: pytest.Config) -> None:
    _share_bytecode_cache()
    # test gateways start from a process that has imported them (vikingbot/testing/
    # forkserver.py); a start that changes how Python starts still runs a new interpreter
    os.environ.setdefault("VIKINGBOT_TEST_FORK", "1")
    # xdist hands the files out as the workers collected them: most costly first
    # (tests/file_order.py), not reordered by their number of tests
    if getattr(config.option, "loadscopereorder", False):
        config.option.loadscopereorder = False
    if Recorder.wanted(config):
        config.pluginmanager.register(Recorder(), "vikingbot-file-costs")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker (a serial run keeps its order)
        sort_items(items)


def _share_bytecode_cache() -> None:
    """Give the suite's Python processes a byte-code cache outside the tree.

    With ``PYTHONDONTWRITEBYTECODE=1`` and a venv installed without byte-code,
    every ``vikingbot gateway`` or CLI process the tests start compiled each
    module it imports again: about 1.5 s of CPU per process, hundreds of times
    per run (bench/gateway_start.py). An installed vikingbot has its byte-code,
    so this only brings the tests' processes back to the production state.
    Nothing is written into the source tree or the venv: the cache lives under
    ``PYTHONPYCACHEPREFIX`` in the temporary folder (Python checks each entry
    against its source file's mtime and size). Set by the xdist controller
    before it starts the workers, so workers and their children inherit it.
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    cache = Path(tempfile.gettempdir()) / f"vikingbot-test-pycache-{os.getuid()}"
    try:
        cache.mkdir(mode=0o700, exist_ok=True)
        if cache.is_symlink() or cache.stat().st_uid != os.getuid():
            return  # not ours: leave the setting alone
    except OSError:
        return
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = str(cache)


@pytest.fixture(scope="session")
def pg_url() -> str:
    """The test PostgreSQL URL; skips the test when the server cannot be reached."""
    url = os.environ.get("VIKINGBOT_TEST_PG_URL", DEFAULT_PG_URL)
    # CI sets VIKINGBOT_REQUIRE_PG=1 after starting the server: there, a missing
    # server is a failure, not a skip, so the PostgreSQL half of the suite always runs.
    required = os.environ.get("VIKINGBOT_REQUIRE_PG") == "1"
    try:
        import psycopg
    except ImportError:
        if required:
            pytest.fail("psycopg not installed but VIKINGBOT_REQUIRE_PG=1")
        pytest.skip("psycopg not installed (uv sync --extra postgres)")
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        if required:
            pytest.fail(
                f"PostgreSQL not reachable at {mask_url(url)} (VIKINGBOT_REQUIRE_PG=1): {reason}"
            )
        pytest.skip(f"PostgreSQL not reachable at {mask_url(url)}: {reason}")
    return url


class _SharedSchema:
    """A migrated PostgreSQL schema handed to one test at a time, emptied in between."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.base: StateStore | None = None
        self.layout: tuple[set[str], set[str]] = (set(), set())
        self.used: list[str] = []

    @staticmethod
    def _layout(conn: Connection) -> tuple[set[str], set[str]]:
        """(tables, sequences) in the connection's schema."""
        found = conn.exec_driver_sql(
            "SELECT relkind, relname FROM pg_class "
            "WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'S')"
        ).all()
        return {n for k, n in found if k == "r"}, {n for k, n in found if k == "S"}

    def take(self) -> StateStore:
        if self.base is None:
            name = f"test_{uuid.uuid4().hex[:16]}"
            self.used.append(name)
            self.base = StateStore.open(self.url, schema=name)
            with self.base.engine.connect() as conn:
                self.layout = self._layout(conn)
        # A new object per test: tests may set store.clock or call close().
        return StateStore(self.base.engine, name=self.base.url)

    def give_back(self) -> None:
        """Empty every table and restart every id (DELETE: far cheaper than TRUNCATE)."""
        from sqlalchemy.exc import SQLAlchemyError

        from vikingbot.store.migrations import LATEST_VERSION, current_version

        assert self.base is not None
        tables, sequences = self.layout
        try:
            with self.base.engine.begin() as conn:
                conn.exec_driver_sql("SET LOCAL lock_timeout = '10s'")
                conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
                if self._layout(conn) == self.layout and current_version(conn) == LATEST_VERSION:
                    for table in sorted(tables - {"alembic_version"}):
                        conn.exec_driver_sql(f'DELETE FROM "{table}"')
                    for seq in sorted(sequences):
                        conn.exec_driver_sql(f"SELECT setval('\"{seq}\"', 1, false)")
                    return
        except SQLAlchemyError:
            pass
        self.base.close()  # changed or stuck: the next test gets a new schema
        self.base = None

    def drop_all(self) -> None:
        import psycopg

        if self.base is not None:
            self.base.close()
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '10s'")
            for name in self.used:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(scope="session")
def _pg_schema(pg_url: str) -> Iterator[_SharedSchema]:
    shared = _SharedSchema(pg_url)
    yield shared
    shared.drop_all()


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store-template") / "state.db"
    StateStore.open(f"sqlite:///{path}").close()  # the last close folds the WAL into the file
    assert not path.with_name("state.db-wal").exists()
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    """A migrated, empty StateStore on each backend."""
    if request.param == "sqlite":
        path = tmp_path / "state.db"
        shutil.copyfile(request.getfixturevalue("_sqlite_template"), path)
        with StateStore.open(f"sqlite:///{path}") as st:
            yield st
        return
    shared: _SharedSchema = request.getfixturevalue("_pg_schema")
    st = shared.take()
    yield st
    shared.give_back()


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    """Secret values a test's config taught ``redact`` stay with that test."""
    yield
    from vikingbot.redact import forget_all

    forget_all()
