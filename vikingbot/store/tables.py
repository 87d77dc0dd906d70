"""Every table of the state database, on one MetaData.

The schema is versioned: ``vikingbot.store.migrations`` creates and alters these
tables step by step, and a table added here must come with a migration.
Times are ``UtcDateTime``: stored as UTC and read back timezone-aware on every
backend (plain ``DateTime(timezone=True)`` loses the offset on SQLite).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from vikingbot.store.types import UtcDateTime

metadata = MetaData()

# Who did what, and why: tool approvals, refused delivery targets, strangers, pauses.
audit_events = Table(
    "audit_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", UtcDateTime(), nullable=False, index=True),
    Column("actor", String(200), nullable=False),  # e.g. "heartbeat", "cron:daily", "user"
    Column("action", String(100), nullable=False),  # e.g. "tool.approve", "delivery.refuse"
    Column("subject", String(500), nullable=False),  # e.g. tool name, target, session key
    Column("outcome", String(50), nullable=False),  # e.g. "approved", "denied", "refused"
    Column("reason", Text),
    Column("details", JSON),
)

# The heartbeat run ledger: one row per decision (run or skip).
heartbeat_runs = Table(
    "heartbeat_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cycle_id", String(64), nullable=False, index=True),
    Column("at", UtcDateTime(), nullable=False, index=True),
    Column("workspace", String(300), nullable=False, index=True),
    Column("session", String(600)),
    Column("entry", String(500)),
    Column("trigger", String(20), nullable=False),  # scheduled | manual
    Column("decision", String(10), nullable=False),  # run | skip
    Column("reason", String(50), nullable=False),
    Column("outcome", String(30)),  # ok | ok-empty | delivered | kept | completed | error | timeout
    Column("duration_s", Float),
    Column("model_calls", Integer, nullable=False, default=0),
    Column("tokens_in", Integer, nullable=False, default=0),
    Column("tokens_out", Integer, nullable=False, default=0),
    Column("cost_usd", Float, nullable=False, default=0.0),
    Column("error", Text),
    Column(
        "model", String(400)
    ),  # "provider/model" that answered (0008; a fallback's in an outage)
)

# Per workspace and entry: the schedule and lifecycle state of HEARTBEAT.md entries.
heartbeat_entries = Table(
    "heartbeat_entries",
    metadata,
    Column("workspace", String(300), primary_key=True),
    Column("entry", String(500), primary_key=True),  # title, or the entry's text key
    Column("first_seen", UtcDateTime(), nullable=False),
    Column("last_fired", UtcDateTime()),
    Column("signature", String(200)),
    Column("retries", Integer, nullable=False, default=0),
    Column("continuations", Integer, nullable=False, default=0),
    Column("continue_next", Boolean, nullable=False, default=False),
    Column("running_since", UtcDateTime()),
    Column("parked_reason", Text),
    Column("parked_text_hash", String(64)),  # entry text when parked; an edit un-parks
    Column("last_outcome", String(30)),
)

# Per workspace: cadence, pause and budget state.
heartbeat_workspaces = Table(
    "heartbeat_workspaces",
    metadata,
    Column("workspace", String(300), primary_key=True),
    Column("last_cycle_at", UtcDateTime()),
    Column("paused", Boolean, nullable=False, default=False),
    Column("paused_reason", String(50)),  # user | budget
    Column("paused_at", UtcDateTime()),
    Column("budget_day", String(10)),  # YYYY-MM-DD the counters below belong to
    Column("tokens_today", Integer, nullable=False, default=0),
    Column("cost_today", Float, nullable=False, default=0.0),
    Column("hb_session_prompts", Integer, nullable=False, default=0),
    Column("hb_session_generation", Integer, nullable=False, default=0),
    Column("last_checklist_at", UtcDateTime()),  # last checklist-mode run (cadence)
    # the latest decision and since when it holds (identical skips are not re-written)
    Column("last_decision", String(10)),
    Column("last_reason", String(50)),
    Column("last_decision_at", UtcDateTime()),
    Column("last_outcome", String(30)),
    Column("last_run_at", UtcDateTime()),
)

# Per workspace, session and entry ('' when none): the skip its latest decision repeats
# ("reason|detail"); the ledger records a skip only when it starts a streak.
heartbeat_streaks = Table(
    "heartbeat_streaks",
    metadata,
    Column("workspace", String(300), primary_key=True),
    Column("session", String(600), primary_key=True),
    Column("entry", String(500), primary_key=True),
    Column("signature", Text, nullable=False),
)

# Where a polled chat channel's updates continue ("telegram:default" -> the next
# update id to fetch), shared by the gateways on one database: the gateway that takes
# the channel over neither answers an update again nor skips one (issue 14).
channel_offsets = Table(
    "channel_offsets",
    metadata,
    Column("channel", String(200), primary_key=True),
    Column("next_update", BigInteger, nullable=False),
    Column("updated_at", UtcDateTime()),
)

# Things the owner has been told once (errors, parks, budget pauses), by digest.
notices = Table(
    "notices",
    metadata,
    Column("workspace", String(300), primary_key=True),
    Column("digest", String(64), primary_key=True),
    Column("kind", String(50), nullable=False),
    Column("at", UtcDateTime(), nullable=False),
)

# Outgoing messages: written before the send, marked sent after the platform accepted.
outbox = Table(
    "outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dedupe_key", String(200), nullable=False),
    Column("channel", String(50), nullable=False),
    Column("channel_id", String(200), nullable=False, default="default"),
    Column("chat_id", String(300), nullable=False),
    Column("thread", String(300)),
    Column("text", Text, nullable=False),
    Column("status", String(20), nullable=False, default="pending"),  # pending | sent | failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("sent_at", UtcDateTime()),
    Column("details", JSON),
    # Which gateway is sending a pending row, until when; another takes it over after.
    Column("sender", String(200)),
    Column("lease_until", UtcDateTime()),
    UniqueConstraint("dedupe_key", name="uq_outbox_dedupe_key"),
    Index("ix_outbox_status", "status"),
)

# The local inbox for `dashboard` targets until a web dashboard exists.
inbox = Table(
    "inbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("slot", String(200), nullable=False, default="default"),
    Column("text", Text, nullable=False),
    Column("source", String(300)),
    Column("kind", String(20), nullable=False, default="message"),  # message | prompt
    Column("created_at", UtcDateTime(), nullable=False),
    Column("read_at", UtcDateTime()),
)

# Cron jobs.
cron_jobs = Table(
    "cron_jobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("kind", String(10), nullable=False),  # at | every | cron
    Column("expr", String(200), nullable=False),  # ISO time | duration | cron expression
    Column("timezone", String(64), nullable=False, default="UTC"),
    Column("prompt", Text, nullable=False),
    Column("target", String(300)),
    Column("workspace", String(300)),
    Column("enabled", Boolean, nullable=False, default=True),
    Column("timeout_s", Float),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("last_run_at", UtcDateTime()),
    Column("next_run_at", UtcDateTime()),
    Column("last_outcome", String(30)),
    Column("last_error", Text),
)

# Session history as searchable rows (the full-text index sits on top of this).
history_docs = Table(
    "history_docs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session_key", String(600), nullable=False),
    Column("line_no", Integer, nullable=False),
    Column("at", UtcDateTime(), nullable=False, index=True),
    Column("role", String(20), nullable=False),
    Column("content", Text, nullable=False),
    UniqueConstraint("session_key", "line_no", name="uq_history_docs_line"),
)

# How far the indexer has read each session file.
history_cursor = Table(
    "history_cursor",
    metadata,
    Column("session_key", String(600), primary_key=True),
    Column("lines_indexed", Integer, nullable=False, default=0),
    Column("mtime", Float),
)

# Leases: who may do one unit of work (a heartbeat unit, a cron firing, an outbox row's
# send, a channel's polling) until when. ``fence`` grows by one on every new claim of a
# key, so a late finisher holding an older fence cannot write over the newer claimant.
# ``done_at`` marks a unit whose slot fired: it is never claimed again.
leases = Table(
    "leases",
    metadata,
    Column("key", String(400), primary_key=True),
    Column("owner", String(200), nullable=False),
    Column("fence", Integer, nullable=False, default=1),
    Column("acquired_at", UtcDateTime(), nullable=False),
    Column("expires_at", UtcDateTime(), nullable=False, index=True),
    Column("done_at", UtcDateTime()),
)

# The gateways sharing this database: one row per running gateway process, refreshed
# every few seconds; ``vikingbot status`` and ``/health`` list them.
gateways = Table(
    "gateways",
    metadata,
    Column("id", String(100), primary_key=True),  # host:pid:random, new each start
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("address", String(200)),  # host:port of its HTTP server
    Column("version", String(50)),
    Column("started_at", UtcDateTime(), nullable=False),
    Column("seen_at", UtcDateTime(), nullable=False, index=True),
    Column("stopped_at", UtcDateTime()),
    Column("details", JSON),  # channels held, running turns, ...
)

# Inbound chat messages a channel answered "accepted" for (the webhook's 202), kept until
# the reply is handed to delivery; a restarted gateway answers what is still pending
# (vikingbot.channels.inbound). ``taker``: the gateway answering it (registry id);
# ``attempts``: turns started on it (a message that crashes every gateway is given up).
inbound_messages = Table(
    "inbound_messages",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("channel", String(50), nullable=False),
    Column("channel_id", String(200), nullable=False, default="default"),
    Column("chat_id", String(300), nullable=False),
    Column("sender_id", String(200), nullable=False),
    Column("thread", String(300)),
    Column("text", Text, nullable=False),
    Column("received_at", UtcDateTime(), nullable=False),
    Column("status", String(20), nullable=False, default="pending"),  # pending | answered | failed
    Column("taker", String(200)),
    Column("attempts", Integer, nullable=False, default=0),
    Column("answered_at", UtcDateTime()),
    Index("ix_inbound_messages_status", "status"),
)
