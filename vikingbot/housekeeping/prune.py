"""Retention: drop history, ledger, audit and index rows older than the cutoff.

Session files lose their *oldest* messages only: the longest run of messages
at the start of the file that are all older than the cutoff, plus tool results
right after it whose call was dropped (a model refuses a tool result without
its call). A line that cannot be read stops the cut there: nothing after an
unreadable line is removed. The metadata line is kept byte for byte.

A file is rewritten atomically (temp file, fsync, rename) under the session
store's own per-session file lock, so a concurrent ``append`` waits instead of
being lost. After a rewrite the session's index rows are dropped; the next
index run reads the shorter file from the start.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from loguru import logger
from sqlalchemy.exc import SQLAlchemyError

from vikingbot.errors import SessionError
from vikingbot.fsutil import atomic_write_bytes
from vikingbot.housekeeping.index import forget_session, session_files, session_key_of
from vikingbot.store.tables import audit_events, heartbeat_runs, history_docs

if TYPE_CHECKING:
    from vikingbot.session.store import SessionStore
    from vikingbot.store.db import StateStore


@dataclass
class PruneStats:
    """What one prune pass removed, and what failed."""

    cutoff: datetime | None = None
    rows: dict[str, int] = field(default_factory=dict)
    sessions_pruned: int = 0
    lines_removed: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff,
            "rows": dict(self.rows),
            "sessions_pruned": self.sessions_pruned,
            "lines_removed": self.lines_removed,
            "errors": list(self.errors),
        }


def _line_info(raw: bytes) -> tuple[datetime, str] | None:
    """(timestamp, role) of a message line; ``None`` when it cannot be read."""
    try:
        obj = json.loads(raw.decode("utf-8"))
        when = datetime.fromisoformat(obj["timestamp"])
        role = obj["role"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    if not isinstance(role, str):
        return None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when, role


def cut_point(lines: list[bytes], cutoff: datetime) -> int:
    """How many message lines (from the start of ``lines``) are old enough to drop."""
    cut = 0
    for raw in lines:
        info = _line_info(raw)
        if info is None or info[0] >= cutoff:
            break
        cut += 1
    if cut == 0:
        return 0
    while cut < len(lines):  # tool results whose call went with the cut
        info = _line_info(lines[cut])
        if info is None or info[1] != "tool":
            break
        cut += 1
    return cut


def prune_session_file(sessions: SessionStore, path: Path, cutoff: datetime) -> int:
    """Remove old messages from one session file; returns how many lines went.

    Holds the session store's lock for the file (``SessionStore.locked``).
    """
    with sessions.locked(path):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return 0
        lines = [raw for raw in data.split(b"\n")]
        if lines and lines[-1] == b"":
            lines.pop()
        if not lines:
            return 0
        head, body = lines[0], [raw for raw in lines[1:] if raw.strip()]
        try:
            head_obj = json.loads(head.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SessionError(f"{path}:1: metadata line unreadable; not pruned") from exc
        if not isinstance(head_obj, dict) or head_obj.get("_type") != "metadata":
            raise SessionError(f"{path}:1: first line is not the metadata line; not pruned")
        cut = cut_point(body, cutoff)
        if cut == 0:
            return 0
        kept = body[cut:]
        atomic_write_bytes(path, b"\n".join([head, *kept]) + b"\n")
        return cut


def prune_rows(store: StateStore, cutoff: datetime) -> dict[str, int]:
    """Delete heartbeat ledger, audit and history-index rows older than ``cutoff``."""
    counts: dict[str, int] = {}
    with store.engine.begin() as conn:
        for table in (heartbeat_runs, audit_events, history_docs):
            result = conn.execute(sa.delete(table).where(table.c.at < cutoff))
            counts[table.name] = int(result.rowcount or 0)
    return counts


def prune(
    store: StateStore, sessions: SessionStore, cutoff: datetime, stats: PruneStats | None = None
) -> PruneStats:
    """One full pass: database rows, then every session file.

    A failing step (the database, one file) is logged and collected in
    ``errors``; the other steps still run.
    """
    stats = stats or PruneStats()
    stats.cutoff = cutoff
    try:
        stats.rows = prune_rows(store, cutoff)
    except SQLAlchemyError as exc:
        logger.error("prune: database rows left as they are: {}", exc)
        stats.errors.append(f"state database: {exc}")
    # heartbeat and cron sessions (kept apart in .system) are trimmed the same way
    for path in [*session_files(sessions.sessions_dir), *session_files(sessions.system_dir)]:
        try:
            removed = prune_session_file(sessions, path, cutoff)
            if not removed:
                continue
            stats.sessions_pruned += 1
            stats.lines_removed += removed
            with path.open("rb") as fh:
                key = session_key_of(fh.readline())
            if key is not None:
                with store.engine.begin() as conn:
                    forget_session(conn, key)
        except (OSError, SessionError, SQLAlchemyError) as exc:
            logger.warning("prune: {}: {}", path.name, exc)
            stats.errors.append(f"{path}: {exc}")
    logger.info(
        "prune: before {}: {} row(s) {}, {} line(s) from {} session(s), {} error(s)",
        cutoff,
        sum(stats.rows.values()),
        stats.rows,
        stats.lines_removed,
        stats.sessions_pruned,
        len(stats.errors),
    )
    return stats
