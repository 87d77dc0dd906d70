"""Schema versions: from empty, re-open, too new, failed steps, concurrent starts.

``target`` (tests/store/conftest.py) is one database on each backend.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import Column, Connection, MetaData, String, Table, inspect, select

from vikingbot.errors import StoreError
from vikingbot.store import LATEST_VERSION, StateStore
from vikingbot.store.migrations import (
    MIGRATIONS,
    Migration,
    add_column,
    check_sequence,
    create_tables,
    migrate,
    schema_version_table,
)
from vikingbot.store.tables import metadata

if TYPE_CHECKING:
    from conftest import Target  # tests/store/conftest.py


# The schema the newest migration leaves, table -> columns, on both backends. When
# tables.py or MIGRATIONS change: if RECORDED_VERSION was never released, update
# this record; otherwise add a migration and record its version here.
RECORDED_VERSION = 3
SCHEMA: dict[str, set[str]] = {
    "audit_events": {"action", "actor", "at", "details", "id", "outcome", "reason", "subject"},
    "cron_jobs": {
        "created_at", "enabled", "expr", "id", "kind", "last_error", "last_outcome",
        "last_run_at", "name", "next_run_at", "prompt", "target", "timeout_s", "timezone",
        "workspace",
    },
    "heartbeat_entries": {
        "continuations", "continue_next", "entry", "first_seen", "last_fired",
        "last_outcome", "parked_reason", "parked_text_hash", "retries", "running_since",
        "signature", "workspace",
    },
    "heartbeat_runs": {
        "at", "cost_usd", "cycle_id", "decision", "duration_s", "entry", "error", "id",
        "model_calls", "outcome", "reason", "session", "tokens_in", "tokens_out", "trigger",
        "workspace",
    },
    "heartbeat_workspaces": {
        "budget_day", "cost_today", "hb_session_generation", "hb_session_prompts",
        "last_checklist_at", "last_cycle_at", "last_decision", "last_decision_at",
        "last_outcome", "last_reason", "last_run_at", "paused", "paused_at",
        "paused_reason", "tokens_today", "workspace",
    },
    "history_cursor": {"lines_indexed", "mtime", "session_key"},
    "history_docs": {"at", "content", "id", "line_no", "role", "session_key"},
    "inbox": {"created_at", "id", "kind", "read_at", "slot", "source", "text"},
    "leases": {"acquired_at", "done_at", "expires_at", "fence", "key", "owner"},
    "notices": {"at", "digest", "kind", "workspace"},
    "outbox": {
        "attempts", "channel", "channel_id", "chat_id", "created_at", "dedupe_key",
        "details", "id", "last_error", "sent_at", "status", "text", "thread",
    },
    "schema_version": {"applied_at", "description", "version"},
}  # fmt: skip
# SQLite's full-text index (migration 2) is a virtual table with shadow tables.
SQLITE_ONLY = {
    "history_fts", "history_fts_config", "history_fts_data", "history_fts_docsize",
    "history_fts_idx",
}  # fmt: skip


def _db_schema(store: StateStore) -> dict[str, set[str]]:
    with store.engine.connect() as conn:
        insp = inspect(conn)
        return {
            name: {c["name"] for c in insp.get_columns(name)} for name in insp.get_table_names()
        }


def _versions(store: StateStore) -> list[int]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(schema_version_table.c.version).order_by("version"))
        return [r[0] for r in rows]


def test_empty_database_is_migrated_to_the_latest_schema(target: Target) -> None:
    with target.open() as store:
        assert store.backend == target.backend
        assert store.schema_version() == LATEST_VERSION == RECORDED_VERSION
        assert _versions(store) == list(range(1, LATEST_VERSION + 1))
        found = _db_schema(store)
        extra = SQLITE_ONLY if target.backend == "sqlite" else set()
        assert set(found) == set(SCHEMA) | extra
        assert {name: found[name] for name in SCHEMA} == SCHEMA


def test_tables_py_matches_the_recorded_schema() -> None:
    in_code = {t.name: {c.name for c in t.columns} for t in metadata.sorted_tables}
    recorded = {name: cols for name, cols in SCHEMA.items() if name != "schema_version"}
    assert (LATEST_VERSION, in_code) == (RECORDED_VERSION, recorded), (
        "the schema changed: add a migration for it (see vikingbot/store/migrations.py) "
        "and record the result here, or, if the recorded version was never released, "
        "just update the record"
    )


def test_reopening_changes_nothing_and_keeps_data(target: Target) -> None:
    with target.open() as store:
        store.audit("user", "tool.approve", "exec", "approved")
    with target.open() as store:
        assert _versions(store) == list(range(1, LATEST_VERSION + 1))
        assert [e["subject"] for e in store.audit_events()] == ["exec"]


def test_a_newer_database_is_refused_and_left_alone(target: Target) -> None:
    with target.open() as store:
        with store.engine.begin() as conn:
            conn.execute(
                schema_version_table.insert().values(
                    version=LATEST_VERSION + 1,
                    description="from the future",
                    applied_at=store.clock.now(),
                )
            )
        with pytest.raises(StoreError) as info:
            target.open()
        assert (
            f"database schema version {LATEST_VERSION + 1} is newer than this vikingbot "
            f"supports ({LATEST_VERSION}); upgrade vikingbot"
        ) in str(info.value)
        assert _versions(store) == [*range(1, LATEST_VERSION + 1), LATEST_VERSION + 1]
        # An upgraded vikingbot that knows the newer step accepts the database as it is.
        newer = [*MIGRATIONS, Migration(LATEST_VERSION + 1, "from the future", _never)]
        assert migrate(store.engine, newer, where=store.url) == LATEST_VERSION + 1


def _never(conn: Connection) -> None:
    raise AssertionError("an applied migration ran again")


def test_a_failed_step_is_rolled_back_and_named(target: Target) -> None:
    def broken(conn: Connection) -> None:
        widgets = Table("widgets", MetaData(), Column("name", String(20)))
        create_tables(conn, widgets)
        raise ValueError("disk on fire")

    steps = [*MIGRATIONS, Migration(LATEST_VERSION + 1, "add widgets", broken)]
    with target.open() as store:
        with pytest.raises(StoreError) as info:
            migrate(store.engine, steps, where=store.url)
        assert f"migration {LATEST_VERSION + 1} (add widgets) failed: disk on fire" in str(
            info.value
        )
        assert store.schema_version() == LATEST_VERSION
        assert "widgets" not in _db_schema(store)  # the DDL was rolled back too


def test_add_column_upgrades_an_old_database_and_skips_a_new_one(target: Target) -> None:
    extended = Table("audit_events", MetaData(), Column("note", String(50)))
    steps = [
        *MIGRATIONS,
        Migration(LATEST_VERSION + 1, "audit note", lambda c: add_column(c, extended, "note")),
    ]
    with target.open() as store:
        store.audit("user", "tool.approve", "exec", "approved")
        assert migrate(store.engine, steps, where=store.url) == LATEST_VERSION + 1
        assert "note" in _db_schema(store)["audit_events"]
        assert store.audit_events()[0]["subject"] == "exec"
        # Running the step body again (a fresh database already has the column) is harmless.
        with store.engine.begin() as conn:
            add_column(conn, extended, "note")


def test_versions_must_be_contiguous() -> None:
    step = MIGRATIONS[0]
    with pytest.raises(ValueError, match="without gaps"):
        check_sequence([step, Migration(3, "skips 2", step.apply)])


def test_threads_opening_at_once_migrate_exactly_once(target: Target) -> None:
    start = threading.Barrier(4)
    errors: list[BaseException] = []
    stores: list[StateStore] = []

    def open_one() -> None:
        start.wait()
        try:
            stores.append(target.open())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    try:
        assert errors == []
        assert len(stores) == 4
        assert _versions(stores[0]) == list(range(1, LATEST_VERSION + 1))
    finally:
        for st in stores:
            st.close()


_CHILD = """
import sys
from vikingbot.store import StateStore
print("ready", flush=True)
sys.stdin.readline()
store = StateStore.open(sys.argv[1])
store.audit("process", "test.start", sys.argv[2], "ok")
print(store.schema_version(), flush=True)
store.close()
"""


def test_processes_opening_at_once_migrate_exactly_once(tmp_path: Path) -> None:
    # The gateway and CLI commands share one SQLite file; PostgreSQL's lock is covered
    # by the threads test above (each store there has connections of its own).
    url = f"sqlite:///{tmp_path / 'state.db'}"
    root = Path(__file__).resolve().parents[2]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, url, f"p{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
        )
        for i in range(2)
    ]
    try:
        for child in children:  # wait until every child has imported everything
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=60) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    for child, (out, err) in zip(children, results, strict=True):
        assert child.returncode == 0, err
        assert out.strip() == str(LATEST_VERSION)
    with StateStore.open(url) as store:
        assert _versions(store) == list(range(1, LATEST_VERSION + 1))
        assert sorted(e["subject"] for e in store.audit_events()) == ["p0", "p1"]
