"""Schema versions (Alembic): from empty, re-open, too new, failed steps, legacy
databases, concurrent starts.

``target`` (tests/store/conftest.py) is one database on each backend.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import inspect, text

from vikingbot.errors import StoreError
from vikingbot.store import LATEST_VERSION, StateStore
from vikingbot.store.migrations import SCRIPTS, known_versions, migrate
from vikingbot.store.tables import metadata

if TYPE_CHECKING:
    from tests.support.databases import SharedDb as Target


# The schema the newest migration leaves, table -> columns, on both backends. When
# tables.py or the revisions change: if RECORDED_VERSION was never released, update
# this record; otherwise add a revision and record its version here.
RECORDED_VERSION = 8
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
        "model", "model_calls", "outcome", "reason", "session", "tokens_in", "tokens_out", "trigger",
        "workspace",
    },
    "heartbeat_streaks": {"entry", "session", "signature", "workspace"},
    "channel_offsets": {"channel", "next_update", "updated_at"},
    "heartbeat_workspaces": {
        "budget_day", "cost_today", "hb_session_generation", "hb_session_prompts",
        "last_checklist_at", "last_cycle_at", "last_decision", "last_decision_at",
        "last_outcome", "last_reason", "last_run_at", "paused", "paused_at",
        "paused_reason", "tokens_today", "workspace",
    },
    "history_cursor": {"lines_indexed", "mtime", "session_key"},
    "history_docs": {"at", "content", "id", "line_no", "role", "session_key"},
    "inbound_messages": {
        "answered_at", "channel", "channel_id", "chat_id", "id", "received_at", "sender_id",
        "status", "attempts", "taker", "text", "thread",
    },
    "inbox": {"created_at", "id", "kind", "read_at", "slot", "source", "text"},
    "leases": {"acquired_at", "done_at", "expires_at", "fence", "key", "owner"},
    "notices": {"at", "digest", "kind", "workspace"},
    "outbox": {
        "attempts", "channel", "channel_id", "chat_id", "created_at", "dedupe_key",
        "details", "id", "last_error", "lease_until", "sender", "sent_at", "status", "text",
        "thread",
    },
    "gateways": {
        "address", "details", "host", "id", "pid", "seen_at", "started_at", "stopped_at",
        "version",
    },
    "alembic_version": {"version_num"},
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


def _versions(store: StateStore) -> list[str]:
    with store.engine.connect() as conn:
        return [r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))]


LATEST = f"{LATEST_VERSION:04d}"


def _scripts_with(tmp_path: Path, revision: str, body: str) -> Path:
    """The shipped revisions plus one more (``NNNN_slug.py``), in a folder of their own."""
    scripts = tmp_path / "scripts"
    shutil.copytree(SCRIPTS, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    number = revision.split("_", 1)[0]
    (scripts / "versions" / f"{revision}.py").write_text(
        f'"""{revision.split("_", 1)[1].replace("_", " ")}"""\n'
        "from alembic import op\nimport sqlalchemy as sa\n"
        f"revision = {number!r}\ndown_revision = {LATEST!r}\n"
        "branch_labels = None\ndepends_on = None\n\n"
        "def upgrade() -> None:\n" + textwrap.indent(textwrap.dedent(body), "    ")
    )
    return scripts


def test_empty_database_is_migrated_to_the_latest_schema(target: Target) -> None:
    with target.open() as store:
        assert store.backend == target.backend
        assert store.schema_version() == LATEST_VERSION == RECORDED_VERSION
        assert _versions(store) == [LATEST]
        found = _db_schema(store)
        extra = SQLITE_ONLY if target.backend == "sqlite" else set()
        assert set(found) == set(SCHEMA) | extra
        assert {name: found[name] for name in SCHEMA} == SCHEMA


def test_the_revisions_build_exactly_what_tables_py_says(target: Target) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    def ours(name: str | None, kind: str, parents: object) -> bool:
        # The full-text index (revision 0002) is raw SQL, not part of tables.py.
        return not (name or "").startswith(("history_fts", "ix_history_docs_fts"))

    with target.open() as store, store.engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_name": ours, "compare_type": True}
        )
        assert compare_metadata(context, metadata) == [], (
            "tables.py and the revisions disagree: add a revision (docs/architecture.md)"
        )


def test_tables_py_matches_the_recorded_schema() -> None:
    in_code = {t.name: {c.name for c in t.columns} for t in metadata.sorted_tables}
    recorded = {name: cols for name, cols in SCHEMA.items() if name != "alembic_version"}
    assert (LATEST_VERSION, in_code) == (RECORDED_VERSION, recorded), (
        "the schema changed: add a revision for it (docs/architecture.md) and record "
        "the result here, or, if the recorded version was never released, just update "
        "the record"
    )


def test_revisions_are_one_numbered_line() -> None:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(SCRIPTS))
    chain = [r.revision for r in script.walk_revisions()][::-1]
    assert chain == [f"{n:04d}" for n in known_versions()]
    assert chain == [f"{n:04d}" for n in range(1, LATEST_VERSION + 1)]
    assert script.get_heads() == [LATEST]


def test_reopening_changes_nothing_and_keeps_data(target: Target) -> None:
    with target.open() as store:
        store.audit("user", "tool.approve", "exec", "approved")
    with target.open() as store:
        assert _versions(store) == [LATEST]
        assert [e["subject"] for e in store.audit_events()] == ["exec"]


def test_a_newer_database_is_refused_and_left_alone(target: Target, tmp_path: Path) -> None:
    newer = f"{LATEST_VERSION + 1:04d}"
    with target.open() as store:
        with store.engine.begin() as conn:
            conn.execute(text(f"UPDATE alembic_version SET version_num = '{newer}'"))
        with pytest.raises(StoreError) as info:
            target.open()
        assert (
            f"database schema version {newer} is newer than this vikingbot supports "
            f"({LATEST}); upgrade vikingbot"
        ) in str(info.value)
        assert _versions(store) == [newer]
        # An upgraded vikingbot that knows the newer step accepts the database as it is.
        scripts = _scripts_with(
            tmp_path, f"{newer}_from_the_future", "raise AssertionError('ran again')\n"
        )
        assert migrate(store.engine, where=store.url, scripts=scripts) == LATEST_VERSION + 1


def test_a_failed_step_is_rolled_back_and_named(target: Target, tmp_path: Path) -> None:
    newer = LATEST_VERSION + 1
    scripts = _scripts_with(
        tmp_path,
        f"{newer:04d}_add_widgets",
        """
        op.create_table("widgets", sa.Column("name", sa.String(20)))
        raise ValueError("disk on fire")
        """,
    )
    with target.open() as store:
        with pytest.raises(StoreError) as info:
            migrate(store.engine, where=store.url, scripts=scripts)
        assert f"migration {newer:04d} (add widgets) failed: disk on fire" in str(info.value)
        assert store.schema_version() == LATEST_VERSION
        assert "widgets" not in _db_schema(store)  # the DDL was rolled back too


def test_a_new_column_upgrades_an_old_database_keeping_its_rows(
    target: Target, tmp_path: Path
) -> None:
    newer = LATEST_VERSION + 1
    scripts = _scripts_with(
        tmp_path,
        f"{newer:04d}_audit_note",
        """
        with op.batch_alter_table("audit_events") as batch:
            batch.add_column(sa.Column("note", sa.String(50)))
        """,
    )
    with target.open() as store:
        store.audit("user", "tool.approve", "exec", "approved")
        assert migrate(store.engine, where=store.url, scripts=scripts) == newer
        assert "note" in _db_schema(store)["audit_events"]
        assert store.audit_events()[0]["subject"] == "exec"
        assert migrate(store.engine, where=store.url, scripts=scripts) == newer  # idempotent


@pytest.mark.parametrize("legacy", [1, 2, 3])
def test_a_database_from_before_alembic_is_adopted_and_upgraded(
    target: Target, legacy: int
) -> None:
    """vikingbot's own runner left ``schema_version`` rows 1..N; nothing is rebuilt."""
    with target.open() as store:
        store.audit("user", "tool.approve", "exec", "approved")
        with store.engine.begin() as conn:  # turn it into what the old runner left
            conn.exec_driver_sql("DROP TABLE alembic_version")
            conn.exec_driver_sql(
                "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, "
                "description VARCHAR(200) NOT NULL, applied_at TIMESTAMP NOT NULL)"
            )
            for version in range(1, legacy + 1):
                conn.execute(
                    text("INSERT INTO schema_version VALUES (:v, 'old', CURRENT_TIMESTAMP)"),
                    {"v": version},
                )
            if legacy < 3:
                conn.exec_driver_sql("DROP TABLE leases")
            conn.exec_driver_sql("DROP TABLE inbound_messages")  # revision 0005 is newer
            conn.exec_driver_sql("DROP TABLE heartbeat_streaks")  # and 0006
            conn.exec_driver_sql("DROP TABLE channel_offsets")  # and 0007
            conn.exec_driver_sql("ALTER TABLE heartbeat_runs DROP COLUMN model")  # and 0008
            if legacy < 4:  # the old runner never had revision 0004 (several gateways)
                conn.exec_driver_sql("DROP TABLE gateways")
                conn.exec_driver_sql("ALTER TABLE outbox DROP COLUMN sender")
                conn.exec_driver_sql("ALTER TABLE outbox DROP COLUMN lease_until")
            if legacy == 1 and target.backend == "sqlite":
                for name in ("history_docs_fts_ai", "history_docs_fts_ad", "history_docs_fts_au"):
                    conn.exec_driver_sql(f"DROP TRIGGER {name}")
                conn.exec_driver_sql("DROP TABLE history_fts")
            elif legacy == 1:
                conn.exec_driver_sql("DROP INDEX ix_history_docs_fts")
    with target.open() as store:
        assert _versions(store) == [LATEST]
        assert "schema_version" not in _db_schema(store)
        assert [e["subject"] for e in store.audit_events()] == ["exec"]
        if target.backend == "sqlite":
            assert set(_db_schema(store)) >= SQLITE_ONLY


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
        assert _versions(stores[0]) == [LATEST]
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
        assert _versions(store) == [LATEST]
        assert sorted(e["subject"] for e in store.audit_events()) == ["p0", "p1"]
