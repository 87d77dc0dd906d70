"""Opening the state database: URLs, SQLite settings, and the errors a user sees."""

from __future__ import annotations

import sys
import threading
import uuid
from pathlib import Path

import pytest

from vikingbot.errors import StoreError
from vikingbot.store import LATEST_VERSION, StateStore
from vikingbot.store.db import mask_url


def _pragma(store: StateStore, name: str) -> object:
    with store.engine.connect() as conn:
        return conn.exec_driver_sql(f"PRAGMA {name}").scalar()


def test_sqlite_file_is_created_with_its_folders(tmp_path: Path) -> None:
    path = tmp_path / "home" / "data" / "state.db"
    with StateStore.open(f"sqlite:///{path}") as store:
        assert store.backend == "sqlite"
        assert store.url == f"sqlite:///{path}"
    assert path.is_file()


def test_sqlite_runs_in_wal_mode_with_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    StateStore.open(url).close()
    with StateStore.open(url) as store:  # a later process sees the same settings
        assert _pragma(store, "journal_mode") == "wal"
        assert _pragma(store, "foreign_keys") == 1
        assert int(_pragma(store, "busy_timeout")) >= 5000  # type: ignore[call-overload]


def test_a_writer_waits_for_another_processes_lock_instead_of_failing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with StateStore.open(url) as holder, StateStore.open(url) as waiter:
        errors: list[BaseException] = []

        def write() -> None:
            try:
                waiter.audit("cli", "heartbeat.pause", "shared", "paused")
            except BaseException as exc:
                errors.append(exc)

        with holder.engine.connect() as conn:
            conn.begin()  # BEGIN IMMEDIATE: holds the write lock
            writer = threading.Thread(target=write)
            writer.start()
            writer.join(timeout=0.3)
            assert writer.is_alive(), f"the writer did not wait: {errors}"
            conn.commit()
        writer.join(timeout=30)
        assert errors == []
        assert [e["action"] for e in holder.audit_events()] == ["heartbeat.pause"]


def test_in_memory_sqlite_is_shared_between_threads() -> None:
    with StateStore.open("sqlite://") as store:
        worker = threading.Thread(target=store.audit, args=("heartbeat", "x.y", "s", "ok"))
        worker.start()
        worker.join(timeout=30)
        assert [e["actor"] for e in store.audit_events()] == ["heartbeat"]
        assert store.schema_version() == LATEST_VERSION


def test_a_file_that_is_not_a_database_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(StoreError) as info:
        StateStore.open(f"sqlite:///{path}")
    assert f"cannot open the state database at sqlite:///{path}" in str(info.value)
    assert "not a database" in str(info.value)
    assert path.read_bytes().startswith(b"these are my notes")  # left as it was


def test_a_folder_that_cannot_be_created_is_reported(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("a file where the data folder should be")
    with pytest.raises(StoreError, match="cannot create the folder for the state database"):
        StateStore.open(f"sqlite:///{tmp_path / 'data' / 'state.db'}")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("not a url", "bad database URL 'not a url'"),
        ("mysql://u:pw@127.0.0.1/db", "unsupported database URL 'mysql://u:***@127.0.0.1/db'"),
        ("", "bad database URL ''"),
    ],
)
def test_bad_urls_are_refused_with_the_expected_forms(url: str, expected: str) -> None:
    with pytest.raises(StoreError) as info:
        StateStore.open(url)
    assert expected in str(info.value)
    assert "sqlite:///PATH or postgresql://" in str(info.value)


def test_unreachable_postgres_names_the_server_and_hides_the_password() -> None:
    with pytest.raises(StoreError) as info:
        StateStore.open("postgresql://vb:hunter2@127.0.0.1:1/state")
    message = str(info.value)
    assert "cannot open the state database at postgresql://vb:***@127.0.0.1:1/state" in message
    assert "hunter2" not in message


def test_missing_postgres_driver_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the extra were not installed
    with pytest.raises(StoreError) as info:
        StateStore.open("postgresql://vb:hunter2@127.0.0.1:1/state")
    from vikingbot.extras import hint

    assert hint("postgres") in str(info.value)  # keeps the other extras (vikingbot/extras.py)
    assert "hunter2" not in str(info.value)


def test_schema_option_is_postgres_only_and_checked(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="only supported on PostgreSQL"):
        StateStore.open(f"sqlite:///{tmp_path / 'state.db'}", schema="x")
    with pytest.raises(StoreError, match="bad schema name"):
        StateStore.open("postgresql://127.0.0.1:1/x", schema='x"; drop table y; --')


def test_postgres_schemas_keep_stores_apart(pg_url: str) -> None:
    import psycopg

    names = [f"test_{uuid.uuid4().hex[:16]}" for _ in range(2)]
    first = StateStore.open(pg_url, schema=names[0])
    second = StateStore.open(pg_url, schema=names[1])
    try:
        first.audit("user", "tool.approve", "exec", "approved")
        assert [e["subject"] for e in first.audit_events()] == ["exec"]
        assert second.audit_events() == []
        assert second.schema_version() == LATEST_VERSION
    finally:
        first.close()
        second.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for name in names:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://vb:s3cr%40t@db.internal:5432/bot",
            "postgresql://vb:***@db.internal:5432/bot",
        ),
        ("postgresql://vb@db.internal/bot", "postgresql://vb@db.internal/bot"),
        ("sqlite:////var/lib/vikingbot/state.db", "sqlite:////var/lib/vikingbot/state.db"),
    ],
)
def test_urls_are_shown_without_passwords(url: str, shown: str) -> None:
    assert mask_url(url) == shown
