"""The history index: session JSONL lines copied into ``history_docs``, incrementally.

Each session file is read from where the last run stopped (``history_cursor``:
lines read and the file's mtime). Only ``user`` and ``assistant`` messages with
text are indexed; tool output and system prompts are not. A file whose head
changed under the cursor (a reset, a prune, a hand edit) is detected by
comparing the last indexed line with the file, and that session is indexed
again from the start. The full-text index itself (FTS5 on SQLite, a GIN index
on PostgreSQL; migration 2) follows ``history_docs`` on its own.

Everything here is synchronous and meant to run in a worker thread.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from loguru import logger
from sqlalchemy.exc import SQLAlchemyError

from vikingbot.store.tables import history_cursor, history_docs

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vikingbot.store.db import StateStore

INDEXED_ROLES = frozenset({"user", "assistant"})
MAX_DOC_CHARS = 20_000
_BATCH = 500


@dataclass
class IndexStats:
    """What one indexing pass did."""

    sessions_seen: int = 0
    sessions_updated: int = 0
    sessions_reindexed: int = 0
    docs_added: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions_seen": self.sessions_seen,
            "sessions_updated": self.sessions_updated,
            "sessions_reindexed": self.sessions_reindexed,
            "docs_added": self.docs_added,
            "errors": list(self.errors),
        }


@dataclass(frozen=True)
class Doc:
    line_no: int  # 1-based line in the session file (line 1 is the metadata line)
    at: datetime
    role: str
    content: str


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def doc_from_line(raw: bytes, line_no: int) -> Doc | None:
    """The searchable part of one message line (``None`` for lines not indexed)."""
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(obj, dict) or obj.get("role") not in INDEXED_ROLES:
        return None
    content = obj.get("content")
    at = _parse_time(obj.get("timestamp"))
    if not isinstance(content, str) or not content.strip() or at is None:
        return None
    return Doc(line_no, at, str(obj["role"]), content[:MAX_DOC_CHARS])


def session_key_of(first_line: bytes) -> str | None:
    """The session key recorded in a file's metadata line."""
    try:
        obj = json.loads(first_line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(obj, dict) or obj.get("_type") != "metadata":
        return None
    key = obj.get("key")
    return key if isinstance(key, str) and key else None


def session_files(sessions_dir: Path) -> list[Path]:
    """Session files in ``sessions_dir`` (temp and hidden files left out)."""
    try:
        entries = list(os.scandir(sessions_dir))
    except FileNotFoundError:
        return []
    return sorted(
        Path(e.path)
        for e in entries
        if e.name.endswith(".jsonl") and not e.name.startswith(".") and e.is_file()
    )


def forget_session(conn: Connection, session_key: str) -> None:
    """Drop a session's index rows and cursor (it is indexed again from the start)."""
    conn.execute(sa.delete(history_docs).where(history_docs.c.session_key == session_key))
    conn.execute(sa.delete(history_cursor).where(history_cursor.c.session_key == session_key))


def _cursor_ok(conn: Connection, key: str, lines: list[bytes], indexed: int) -> bool:
    """Does the file still hold, at the same place, the last line we indexed?"""
    if indexed > len(lines):
        return False
    row = conn.execute(
        sa.select(history_docs.c.line_no, history_docs.c.content)
        .where(history_docs.c.session_key == key)
        .order_by(history_docs.c.line_no.desc())
        .limit(1)
    ).first()
    if row is None:
        return True
    line_no, content = row
    if line_no > len(lines):
        return False
    doc = doc_from_line(lines[line_no - 1], line_no)
    return doc is not None and doc.content == content


def _cursor_mtimes(store: StateStore) -> dict[str, float | None]:
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(history_cursor.c.session_key, history_cursor.c.mtime))
        return {r[0]: r[1] for r in rows}


def _index_file(
    store: StateStore, path: Path, stats: IndexStats, seen_mtimes: dict[str, float | None]
) -> None:
    try:
        mtime = path.stat().st_mtime  # before reading: a later change is seen next time
        with path.open("rb") as fh:
            key = session_key_of(fh.readline())
    except FileNotFoundError:
        return  # removed since we listed it
    if key is None:
        stats.errors.append(f"{path}: no metadata line; not indexed")
        return
    stats.sessions_seen += 1
    if key in seen_mtimes and seen_mtimes[key] == mtime:
        return  # unchanged since the last run: not even read
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline after the last line
    if not lines or session_key_of(lines[0]) != key:
        return  # replaced by another session's file meanwhile; next run
    with store.engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # two indexers (the gateway, `sessions search`) take turns per session;
            # on SQLite every transaction already begins IMMEDIATE (one writer)
            conn.execute(
                sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"history:{key}"}
            )
        cur = conn.execute(
            sa.select(history_cursor.c.lines_indexed, history_cursor.c.mtime).where(
                history_cursor.c.session_key == key
            )
        ).first()
        indexed = 0
        if cur is not None:
            indexed, old_mtime = int(cur[0]), cur[1]
            if old_mtime == mtime and indexed == len(lines):
                return
            if not _cursor_ok(conn, key, lines, indexed):
                forget_session(conn, key)
                stats.sessions_reindexed += 1
                cur, indexed = None, 0
        start = max(indexed, 1)  # line 1 is metadata: message lines start at index 1
        docs = [d for n in range(start, len(lines)) if (d := doc_from_line(lines[n], n + 1))]
        for i in range(0, len(docs), _BATCH):
            conn.execute(
                sa.insert(history_docs),
                [
                    {
                        "session_key": key,
                        "line_no": d.line_no,
                        "at": d.at,
                        "role": d.role,
                        "content": d.content,
                    }
                    for d in docs[i : i + _BATCH]
                ],
            )
        values = {"lines_indexed": len(lines), "mtime": mtime}
        if cur is None:
            conn.execute(sa.insert(history_cursor).values(session_key=key, **values))
        else:
            conn.execute(
                sa.update(history_cursor)
                .where(history_cursor.c.session_key == key)
                .values(**values)
            )
    stats.docs_added += len(docs)
    stats.sessions_updated += 1


def index_sessions(store: StateStore, sessions_dir: Path) -> IndexStats:
    """Bring the index up to date with every session file; returns what changed.

    A file that cannot be indexed is reported in ``errors`` and the others go on.
    """
    stats = IndexStats()
    seen_mtimes = _cursor_mtimes(store)
    for path in session_files(Path(sessions_dir)):
        try:
            _index_file(store, path, stats, seen_mtimes)
        except (OSError, SQLAlchemyError) as exc:
            # e.g. another process indexed the same lines at the same moment
            logger.warning("history index: {} not indexed this time: {}", path.name, exc)
            stats.errors.append(f"{path}: {exc}")
    if stats.docs_added or stats.errors:
        logger.info(
            "history index: {} new line(s) from {} session(s), {} error(s)",
            stats.docs_added,
            stats.sessions_updated,
            len(stats.errors),
        )
    return stats
