"""Initial schema: audit, heartbeat ledger and state, outbox, inbox, cron, history.

The schema vikingbot's own migration 1 created before Alembic; a database at
that version is stamped 0001 (see ``vikingbot.store.migrations``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import vikingbot.store.types

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=100), nullable=False),
        sa.Column("subject", sa.String(length=500), nullable=False),
        sa.Column("outcome", sa.String(length=50), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_events_at", "audit_events", ["at"], unique=False)

    op.create_table(
        "cron_jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("expr", sa.String(length=200), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("target", sa.String(length=300), nullable=True),
        sa.Column("workspace", sa.String(length=300), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("timeout_s", sa.Float(), nullable=True),
        sa.Column("created_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("last_run_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("next_run_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("last_outcome", sa.String(length=30), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "heartbeat_entries",
        sa.Column("workspace", sa.String(length=300), nullable=False),
        sa.Column("entry", sa.String(length=500), nullable=False),
        sa.Column("first_seen", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("last_fired", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("signature", sa.String(length=200), nullable=True),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("continuations", sa.Integer(), nullable=False),
        sa.Column("continue_next", sa.Boolean(), nullable=False),
        sa.Column("running_since", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("parked_reason", sa.Text(), nullable=True),
        sa.Column("parked_text_hash", sa.String(length=64), nullable=True),
        sa.Column("last_outcome", sa.String(length=30), nullable=True),
        sa.PrimaryKeyConstraint("workspace", "entry"),
    )
    op.create_table(
        "heartbeat_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("cycle_id", sa.String(length=64), nullable=False),
        sa.Column("at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("workspace", sa.String(length=300), nullable=False),
        sa.Column("session", sa.String(length=600), nullable=True),
        sa.Column("entry", sa.String(length=500), nullable=True),
        sa.Column("trigger", sa.String(length=20), nullable=False),
        sa.Column("decision", sa.String(length=10), nullable=False),
        sa.Column("reason", sa.String(length=50), nullable=False),
        sa.Column("outcome", sa.String(length=30), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("model_calls", sa.Integer(), nullable=False),
        sa.Column("tokens_in", sa.Integer(), nullable=False),
        sa.Column("tokens_out", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_heartbeat_runs_at", "heartbeat_runs", ["at"], unique=False)
    op.create_index("ix_heartbeat_runs_cycle_id", "heartbeat_runs", ["cycle_id"], unique=False)
    op.create_index("ix_heartbeat_runs_workspace", "heartbeat_runs", ["workspace"], unique=False)

    op.create_table(
        "heartbeat_workspaces",
        sa.Column("workspace", sa.String(length=300), nullable=False),
        sa.Column("last_cycle_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("paused_reason", sa.String(length=50), nullable=True),
        sa.Column("paused_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("budget_day", sa.String(length=10), nullable=True),
        sa.Column("tokens_today", sa.Integer(), nullable=False),
        sa.Column("cost_today", sa.Float(), nullable=False),
        sa.Column("hb_session_prompts", sa.Integer(), nullable=False),
        sa.Column("hb_session_generation", sa.Integer(), nullable=False),
        sa.Column(
            "last_checklist_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True
        ),
        sa.Column("last_decision", sa.String(length=10), nullable=True),
        sa.Column("last_reason", sa.String(length=50), nullable=True),
        sa.Column(
            "last_decision_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True
        ),
        sa.Column("last_outcome", sa.String(length=30), nullable=True),
        sa.Column("last_run_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("workspace"),
    )
    op.create_table(
        "history_cursor",
        sa.Column("session_key", sa.String(length=600), nullable=False),
        sa.Column("lines_indexed", sa.Integer(), nullable=False),
        sa.Column("mtime", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("session_key"),
    )
    op.create_table(
        "history_docs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_key", sa.String(length=600), nullable=False),
        sa.Column("line_no", sa.Integer(), nullable=False),
        sa.Column("at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_key", "line_no", name="uq_history_docs_line"),
    )
    op.create_index("ix_history_docs_at", "history_docs", ["at"], unique=False)

    op.create_table(
        "inbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("slot", sa.String(length=200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=300), nullable=True),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("created_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("read_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "notices",
        sa.Column("workspace", sa.String(length=300), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=50), nullable=False),
        sa.Column("at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("workspace", "digest"),
    )
    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dedupe_key", sa.String(length=200), nullable=False),
        sa.Column("channel", sa.String(length=50), nullable=False),
        sa.Column("channel_id", sa.String(length=200), nullable=False),
        sa.Column("chat_id", sa.String(length=300), nullable=False),
        sa.Column("thread", sa.String(length=300), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("sent_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("dedupe_key", name="uq_outbox_dedupe_key"),
    )
    op.create_index("ix_outbox_status", "outbox", ["status"], unique=False)
