"""The heartbeat's memory in the state store: ledger, entry state, workspace state.

Synchronous (SQLAlchemy Core); the service calls it through ``asyncio.to_thread``.
Workspace rows are cached in memory after the first read: the service is the
only writer, and a cycle over 10,000 quiet workspaces must not cost 10,000
queries.

Skip streaks (:meth:`HeartbeatState.keep_row`): the ledger records a skip only
when it starts a streak. Which skip each subject repeats is kept in memory and
in ``heartbeat_streaks``, written in the same transaction as the ledger rows
(:meth:`record`, :meth:`finish`), so a restart neither rewrites 10,000 rows nor
folds a skip that follows a run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, delete, desc, insert, select, update

from vikingbot.heartbeat.types import EntryState, LedgerRow, WorkspaceState, text_hash
from vikingbot.store.db import StateStore, upsert_insert
from vikingbot.store.tables import (
    heartbeat_entries,
    heartbeat_runs,
    heartbeat_streaks,
    heartbeat_workspaces,
)

__all__ = ["EntryState", "HeartbeatState", "LedgerRow", "WorkspaceState", "text_hash"]


_WS_FIELDS = [f.name for f in fields(WorkspaceState)]  # "workspace" first (positional rows)
assert _WS_FIELDS[0] == "workspace"
_ENTRY_FIELDS = [f.name for f in fields(EntryState)]  # workspace, entry first
assert _ENTRY_FIELDS[:2] == ["workspace", "entry"]
Subject = tuple[str, str, str]  # workspace, session or "", entry or ""


class HeartbeatState:
    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._ws: dict[str, WorkspaceState] | None = None
        self._generation: int | None = None
        self._streaks: dict[Subject, str] | None = None  # subject -> "reason|detail"
        self._streak_news: dict[Subject, str | None] = {}  # not yet written (None: ended)
        self._streak_lock = threading.Lock()  # keep_row in the loop, writes in workers

    # ------------------------------------------------------------ skip streaks

    def load_streaks(self) -> None:
        """Read the streaks once (the cycle calls this in a worker before folding)."""
        if self._streaks is not None:
            return
        t = heartbeat_streaks
        with self.store.engine.connect() as conn:
            rows = conn.execute(select(t.c.workspace, t.c.session, t.c.entry, t.c.signature))
            found = {(w, s, e): sig for w, s, e, sig in rows}
        with self._streak_lock:
            if self._streaks is None:
                self._streaks = found

    def keep_row(self, row: LedgerRow) -> bool:
        """Record a skip only when it starts a streak; record every run (and end the streak).

        A scheduled skip that repeats the subject's previous skip (same reason and
        detail) adds nothing a user could learn from, so it is folded away.
        """
        self.load_streaks()
        assert self._streaks is not None
        key = (row.workspace, row.session or "", row.entry or "")
        with self._streak_lock:
            streaks, news = self._streaks, self._streak_news
            if row.decision != "skip":
                if streaks.pop(key, None) is not None:
                    news[key] = None
                return True
            sig = f"{row.reason}|{row.error or ''}"
            old = streaks.get(key)
            if old == sig:
                return row.trigger != "scheduled"
            streaks[key] = news[key] = sig
            return True

    def _write_streaks(self, conn: Any) -> None:
        """Write the streaks changed since the last write. Several gateways on one database
        may write the same subject at once: an upsert, in key order (no deadlock)."""
        with self._streak_lock:
            news, self._streak_news = self._streak_news, {}
        if not news:
            return
        t = heartbeat_streaks
        ended = [{"w": w, "s": s, "e": e} for (w, s, e), sig in sorted(news.items()) if sig is None]
        if ended:
            conn.execute(
                delete(t).where(
                    and_(
                        t.c.workspace == bindparam("w"),
                        t.c.session == bindparam("s"),
                        t.c.entry == bindparam("e"),
                    )
                ),
                ended,
            )
        rows = [
            {"workspace": w, "session": s, "entry": e, "signature": sig}
            for (w, s, e), sig in sorted(news.items())
            if sig is not None
        ]
        if not rows:
            return
        stmt = upsert_insert(conn.dialect.name, t)
        stmt = stmt.on_conflict_do_update(
            index_elements=[t.c.workspace, t.c.session, t.c.entry],
            set_={"signature": stmt.excluded.signature},
        )
        conn.execute(stmt, rows)

    def _load_ws(self) -> dict[str, WorkspaceState]:
        if self._ws is None:
            t = heartbeat_workspaces
            with self.store.engine.connect() as conn:  # plain tuples: 10,000 rows at start
                rows = conn.execute(select(*(t.c[k] for k in _WS_FIELDS))).all()
            self._ws = {r[0]: WorkspaceState(*r) for r in rows}
        return self._ws

    def refresh(self, marker: str = "*") -> None:
        """Reload the cached rows when another process bumped the generation marker.

        On PostgreSQL other gateways write these rows all the time (docs/scaling.md):
        they are read afresh each time (one query per cycle).
        """
        if self.store.backend == "postgresql":
            self._ws = None
            return
        with self.store.engine.connect() as conn:
            gen = conn.execute(
                select(heartbeat_workspaces.c.hb_session_generation).where(
                    heartbeat_workspaces.c.workspace == marker
                )
            ).scalar()
        if gen != self._generation:
            self._ws = None
            self._generation = gen

    def bump_generation(self, marker: str = "*") -> None:
        with self.store.engine.begin() as conn:
            done = conn.execute(
                update(heartbeat_workspaces)
                .where(heartbeat_workspaces.c.workspace == marker)
                .values(hb_session_generation=heartbeat_workspaces.c.hb_session_generation + 1)
            )
            if done.rowcount == 0:
                conn.execute(
                    insert(heartbeat_workspaces).values(workspace=marker, hb_session_generation=1)
                )
        self._ws = None

    def mark_cycle(self, marker: str, at: datetime) -> None:
        """Store when the last cycle started (only that column: the marker row is shared)."""
        with self.store.engine.begin() as conn:
            done = conn.execute(
                update(heartbeat_workspaces)
                .where(heartbeat_workspaces.c.workspace == marker)
                .values(last_cycle_at=at)
            )
            if done.rowcount == 0:
                conn.execute(
                    insert(heartbeat_workspaces).values(workspace=marker, last_cycle_at=at)
                )
        cached = self._ws.get(marker) if self._ws is not None else None
        if cached is not None:  # keep the other rows: reloading them all costs every cycle
            cached.last_cycle_at = at
        else:
            self._ws = None

    def workspace(self, name: str) -> WorkspaceState:
        return self._load_ws().get(name) or WorkspaceState(workspace=name)

    def cycle_started(self, marker: str = "*") -> datetime | None:
        """When the last cycle started, read from the database (another gateway may
        have started it)."""
        with self.store.engine.connect() as conn:
            found: datetime | None = conn.execute(
                select(heartbeat_workspaces.c.last_cycle_at).where(
                    heartbeat_workspaces.c.workspace == marker
                )
            ).scalar()
        return found

    def all_workspaces(self) -> dict[str, WorkspaceState]:
        return dict(self._load_ws())

    def save_workspace(self, ws: WorkspaceState) -> None:
        self.save_workspaces([ws])

    def save_workspaces(self, states: list[WorkspaceState]) -> None:
        """Write several workspace rows in one transaction (new skip streaks)."""
        if not states:
            return
        with self.store.engine.begin() as conn:
            self._upsert(conn, states)
        self._load_ws().update({ws.workspace: ws for ws in states})

    def cache_workspace(self, ws: WorkspaceState) -> None:
        self._load_ws()[ws.workspace] = ws

    def finish(
        self,
        finished: list[tuple[list[LedgerRow], WorkspaceState]],
        entries: Sequence[EntryState] = (),
        *,
        then: Callable[[Any], None] | None = None,
    ) -> None:
        """Ledger rows, workspaces' new state and ``entries``, all in one transaction.

        ``then(conn)`` runs last in the same transaction (the runner ends the unit's
        claim there: results and release commit together, one transaction less).
        """
        if not finished:
            return
        cache = self._load_ws()
        rows = [r.row() for batch, _ in finished for r in batch]
        states = {ws.workspace: ws for _, ws in finished}
        t = heartbeat_workspaces
        with self.store.engine.begin() as conn:
            # `heartbeat pause` from another process while these turns ran must not be
            # undone by writing back the state read before them
            paused = conn.execute(
                select(t.c.workspace, t.c.paused_reason, t.c.paused_at).where(
                    t.c.workspace.in_(list(states)), t.c.paused.is_(True)
                )
            ).all()
            for name, reason, at in paused:
                ws = states[name]
                if not ws.paused:
                    ws.paused, ws.paused_reason, ws.paused_at = True, reason, at
            if rows:
                conn.execute(insert(heartbeat_runs), rows)
            self._upsert(conn, list(states.values()))
            self._write_streaks(conn)
            self._save_entries(conn, entries)
            if then is not None:
                then(conn)
        cache.update(states)

    def _upsert(self, conn: Any, states: list[WorkspaceState]) -> None:
        """Insert or update workspace rows with two executemany statements."""
        names = [ws.workspace for ws in states]
        t = heartbeat_workspaces
        existing = set()
        for i in range(0, len(names), 500):
            chunk = names[i : i + 500]
            existing |= set(
                conn.execute(select(t.c.workspace).where(t.c.workspace.in_(chunk))).scalars()
            )
        new = [
            {k: getattr(ws, k) for k in _WS_FIELDS} for ws in states if ws.workspace not in existing
        ]
        old = [
            {**{f"v_{k}": getattr(ws, k) for k in _WS_FIELDS}}
            for ws in states
            if ws.workspace in existing
        ]
        if new:  # another gateway may insert the same row meanwhile: then it is updated
            conn.execute(upsert_insert(conn.dialect.name, t).on_conflict_do_nothing(), new)
            if conn.dialect.name == "postgresql":
                old += [{f"v_{k}": v for k, v in row.items()} for row in new]
        if old:
            stmt = (
                update(t)
                .where(t.c.workspace == bindparam("v_workspace"))
                .values({k: bindparam(f"v_{k}") for k in _WS_FIELDS if k != "workspace"})
            )
            conn.execute(stmt, old)

    # ------------------------------------------------------------ entries

    def all_entries(self, workspaces: list[str] | None = None) -> dict[tuple[str, str], EntryState]:
        """Every entry row, or only those of ``workspaces`` (a cycle that plans a few)."""
        t = heartbeat_entries
        stmt = select(*(t.c[k] for k in _ENTRY_FIELDS))
        with self.store.engine.connect() as conn:
            if workspaces is None:
                rows = conn.execute(stmt).all()
            else:
                rows = []
                for i in range(0, len(workspaces), 500):
                    chunk = workspaces[i : i + 500]
                    rows += conn.execute(stmt.where(t.c.workspace.in_(chunk))).all()
        return {(r[0], r[1]): EntryState(*r) for r in rows}

    def entry(self, workspace: str, entry: str) -> EntryState | None:
        """One entry's row, read from the database now."""
        with self.store.engine.connect() as conn:
            return self.entry_in(conn, workspace, entry)

    def entry_in(self, conn: Any, workspace: str, entry: str) -> EntryState | None:
        """``entry`` on a connection the caller holds (read under a claim it just took)."""
        r = (
            conn.execute(
                select(heartbeat_entries).where(
                    heartbeat_entries.c.workspace == workspace,
                    heartbeat_entries.c.entry == entry,
                )
            )
            .mappings()
            .first()
        )
        return EntryState(**{k: r[k] for k in _ENTRY_FIELDS}) if r is not None else None

    def save_entry(self, st: EntryState) -> None:
        self.save_entries([st])

    def save_entries(self, states: list[EntryState]) -> None:
        """Insert or update entry rows, all in one transaction."""
        if not states:
            return
        with self.store.engine.begin() as conn:
            self._save_entries(conn, states)

    @staticmethod
    def _save_entries(conn: Any, states: Sequence[EntryState]) -> None:
        t = heartbeat_entries
        for st in states:
            values = {k: getattr(st, k) for k in _ENTRY_FIELDS}
            done = conn.execute(
                update(t)
                .where(and_(t.c.workspace == st.workspace, t.c.entry == st.entry))
                .values(**values)
            )
            if done.rowcount == 0:
                conn.execute(insert(t).values(**values))

    def add_entries(self, states: list[EntryState]) -> None:
        """Insert rows for entries first seen now; a row already there (written by
        another gateway meanwhile) is left as it is."""
        if not states:
            return
        rows = [{k: getattr(st, k) for k in _ENTRY_FIELDS} for st in states]
        with self.store.engine.begin() as conn:
            insert_new = upsert_insert(conn.dialect.name, heartbeat_entries)
            conn.execute(insert_new.on_conflict_do_nothing(), rows)

    def record(self, rows: list[LedgerRow]) -> None:
        """Ledger rows, and the streaks they started, in one transaction."""
        if not rows and not self._streak_news:
            return
        with self.store.engine.begin() as conn:
            if rows:
                conn.execute(insert(heartbeat_runs), [r.row() for r in rows])
            self._write_streaks(conn)

    def runs(self, *, limit: int = 50, workspace: str | None = None) -> list[dict[str, Any]]:
        stmt = select(heartbeat_runs).order_by(desc(heartbeat_runs.c.id)).limit(limit)
        if workspace:
            stmt = stmt.where(heartbeat_runs.c.workspace == workspace)
        with self.store.engine.connect() as conn:
            return [dict(r) for r in conn.execute(stmt).mappings().all()]
