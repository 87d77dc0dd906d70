"""The heartbeat's memory in the state store: ledger, entry state, workspace state.

Synchronous (SQLAlchemy Core); the service calls it through ``asyncio.to_thread``.
Workspace rows are cached in memory after the first read: a cycle over 10,000
quiet workspaces must not cost 10,000 queries. They are read again whole when
the generation marker moved (a pause or resume from any process), and on
PostgreSQL, where other gateways finish units too, only the rows a cycle plans
are read again (:meth:`HeartbeatState.fresh`).

A workspace's row is never written whole from the copy in memory: several
gateways (docs/scaling.md), or a gateway and a CLI command, may finish units of
one workspace at the same moment, each holding a copy read before the other
wrote. A write says what it changes (:class:`WorkspaceChange`) and merges with
what is stored, in one statement: tokens and cost are added (to the stored day's
counters, or they start a new day), prompts are added, the cadence and the latest
decision and run only move forward in time, and the pause is written only by a
pause, a resume or a budget stop (never put back from an old copy). The statement returns the row as stored, which becomes the copy
in memory.

Skip streaks (:meth:`HeartbeatState.keep_row`): the ledger records a skip only
when it starts a streak. Which skip each subject repeats is kept in memory and
in ``heartbeat_streaks``, written in the same transaction as the ledger rows
(:meth:`record`, :meth:`finish`), so a restart neither rewrites 10,000 rows nor
folds a skip that follows a run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, case, delete, desc, insert, or_, select, update

from vikingbot.heartbeat.types import EntryState, LedgerRow, WorkspaceState, text_hash
from vikingbot.store.db import StateStore, upsert_insert
from vikingbot.store.tables import (
    heartbeat_entries,
    heartbeat_runs,
    heartbeat_streaks,
    heartbeat_workspaces,
)

__all__ = [
    "EntryState",
    "HeartbeatState",
    "LedgerRow",
    "WorkspaceChange",
    "WorkspaceState",
    "Written",
    "text_hash",
]


_WS_FIELDS = [f.name for f in fields(WorkspaceState)]  # "workspace" first (positional rows)
assert _WS_FIELDS[0] == "workspace"
_ENTRY_FIELDS = [f.name for f in fields(EntryState)]  # workspace, entry first
assert _ENTRY_FIELDS[:2] == ["workspace", "entry"]
Subject = tuple[str, str, str]  # workspace, session or "", entry or ""


@dataclass(frozen=True)
class WorkspaceChange:
    """What one write changes in a workspace's row; concurrent writers' changes merge.

    - ``day``, ``tokens``, ``cost``: spend of ``day`` (``YYYY-MM-DD``), added to the
      stored counters when they are that day's; an older stored day starts again
      from this spend; spend of a day older than the stored one is not added.
    - ``prompts``: prompts added to the heartbeat session's count.
    - ``checklist_at``: the last checklist run (cadence); kept when the stored one is later.
    - ``decision``/``reason`` at ``decided_at``: the latest decision, written only
      when no later one is stored; ``outcome`` at ``ran_at`` likewise for the last run.
    - ``over_budget``: asked, in the write's transaction, of the row as written (so
      with every gateway's spend): true pauses the workspace for ``"budget"`` at
      ``paused_at``. ``recycle`` likewise: true starts a new heartbeat session
      (prompts back to 0, generation + 1).
    """

    workspace: str
    day: str | None = None
    tokens: int = 0
    cost: float = 0.0
    prompts: int = 0
    checklist_at: datetime | None = None
    decision: str | None = None
    reason: str | None = None
    decided_at: datetime | None = None
    outcome: str | None = None
    ran_at: datetime | None = None
    paused_at: datetime | None = None
    over_budget: Callable[[WorkspaceState], bool] | None = None
    recycle: Callable[[WorkspaceState], bool] | None = None

    def __post_init__(self) -> None:
        if not self.workspace:
            raise ValueError("a workspace change needs the workspace's name")
        if self.day is None and (self.tokens or self.cost):
            raise ValueError(f"{self.workspace}: tokens or cost without the day they belong to")
        if self.tokens < 0 or self.cost < 0 or self.prompts < 0:
            raise ValueError(f"{self.workspace}: spend and prompts are only ever added")
        if (self.decision is None) != (self.decided_at is None):
            raise ValueError(
                f"{self.workspace}: a decision needs its time, and a time its decision"
            )
        if self.over_budget is not None and self.paused_at is None:
            raise ValueError(f"{self.workspace}: a budget stop needs its time (paused_at)")

    @property
    def shape(self) -> tuple[str, ...]:
        """The groups of columns this change writes (one statement per shape)."""
        groups = (
            ("spend", self.day is not None),
            ("prompts", self.prompts != 0),
            ("checklist", self.checklist_at is not None),
            ("decision", self.decided_at is not None),
            ("outcome", self.ran_at is not None),
        )
        return tuple(name for name, on in groups if on)

    def values(self) -> dict[str, Any]:
        """The row a workspace without one gets (every column, the same keys each time)."""
        return {
            "workspace": self.workspace,
            "last_cycle_at": None,
            "paused": False,
            "paused_reason": None,
            "paused_at": None,
            "budget_day": self.day,
            "tokens_today": self.tokens,
            "cost_today": self.cost,
            "hb_session_prompts": self.prompts,
            "hb_session_generation": 0,
            "last_checklist_at": self.checklist_at,
            "last_decision": self.decision,
            "last_reason": self.reason if self.decided_at is not None else None,
            "last_decision_at": self.decided_at,
            "last_outcome": self.outcome if self.ran_at is not None else None,
            "last_run_at": self.ran_at,
        }


@dataclass(frozen=True)
class Written:
    """A workspace's row as one write left it, and what the write's checks did."""

    state: WorkspaceState
    paused: bool = False  # ``over_budget`` said so: paused for "budget" by this write
    recycled: bool = False  # ``recycle`` said so: a new heartbeat session


def _newest(stored: Any, new: Any) -> Any:
    """SQL: the later of a stored time and a new one (a NULL stored time loses)."""
    return case((or_(stored.is_(None), stored < new), new), else_=stored)


def _merge_set(stmt: Any, shape: tuple[str, ...]) -> dict[str, Any]:
    """``ON CONFLICT DO UPDATE`` assignments merging a change (``excluded``) into the
    stored row. Every expression reads the row as it was before this statement."""
    t, ex = heartbeat_workspaces, stmt.excluded
    out: dict[str, Any] = {}
    if "spend" in shape:
        same, later = t.c.budget_day == ex.budget_day, t.c.budget_day > ex.budget_day
        out["budget_day"] = case((later, t.c.budget_day), else_=ex.budget_day)
        for col in ("tokens_today", "cost_today"):
            out[col] = case((same, t.c[col] + ex[col]), (later, t.c[col]), else_=ex[col])
    if "prompts" in shape:
        out["hb_session_prompts"] = t.c.hb_session_prompts + ex.hb_session_prompts
    if "checklist" in shape:
        out["last_checklist_at"] = _newest(t.c.last_checklist_at, ex.last_checklist_at)
    for group, at, cols in (
        ("decision", "last_decision_at", ("last_decision", "last_reason")),
        ("outcome", "last_run_at", ("last_outcome",)),
    ):
        if group in shape:
            newer = or_(t.c[at].is_(None), t.c[at] <= ex[at])
            for col in (*cols, at):
                out[col] = case((newer, ex[col]), else_=t.c[col])
    return out


_MERGES: dict[tuple[str, tuple[str, ...]], Any] = {}


def _merge_stmt(dialect: str, shape: tuple[str, ...]) -> Any:
    """The upsert of one change shape, built once per database kind (building a
    statement costs more than running it)."""
    stmt = _MERGES.get((dialect, shape))
    if stmt is None:
        t = heartbeat_workspaces
        insert_ = upsert_insert(dialect, t)
        stmt = insert_.on_conflict_do_update(
            index_elements=[t.c.workspace], set_=_merge_set(insert_, shape)
        ).returning(*(t.c[k] for k in _WS_FIELDS))
        _MERGES[(dialect, shape)] = stmt
    return stmt


def copy_into(target: WorkspaceState, source: WorkspaceState) -> None:
    """Make ``target`` (a copy someone holds) the same row as ``source``."""
    for k in _WS_FIELDS:
        setattr(target, k, getattr(source, k))


class HeartbeatState:
    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._ws: dict[str, WorkspaceState] | None = None
        self._generation: int | None = None
        self._current = False  # every row was read since the last refresh()
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
            self._current = True  # every row read since the last refresh()
        return self._ws

    def refresh(self, marker: str = "*") -> None:
        """Reload the cached rows when another process bumped the generation marker
        (``heartbeat pause``/``resume``: :meth:`bump_generation`).

        On PostgreSQL other gateways also write rows as their units finish
        (docs/scaling.md); those are read again per cycle for the workspaces it
        plans (:meth:`fresh`), not all 10,000 each cycle.
        """
        with self.store.engine.connect() as conn:
            gen = conn.execute(
                select(heartbeat_workspaces.c.hb_session_generation).where(
                    heartbeat_workspaces.c.workspace == marker
                )
            ).scalar()
        self._current = False
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

    def fresh(self, names: Collection[str]) -> dict[str, WorkspaceState]:
        """The rows of ``names`` as stored since the last :meth:`refresh`, on PostgreSQL
        (read again unless every row was read since, the copies in memory updated in
        place); on SQLite, where this process is the only one running units, the
        copies in memory. A name without a row is left out."""
        cache = self._load_ws()
        if self.store.backend == "postgresql" and names and not self._current:
            if len(names) * 4 >= max(len(cache), 1):  # most of them: one plain read
                self._ws = None
                cache = self._load_ws()
            else:
                self._reread(cache, sorted(names))
        return {n: cache[n] for n in names if n in cache}

    def _reread(self, cache: dict[str, WorkspaceState], names: list[str]) -> None:
        t = heartbeat_workspaces
        found: dict[str, WorkspaceState] = {}
        with self.store.engine.connect() as conn:
            for i in range(0, len(names), 500):
                chunk = names[i : i + 500]
                rows = conn.execute(select(*self._columns()).where(t.c.workspace.in_(chunk)))
                found.update((r[0], WorkspaceState(*r)) for r in rows)
        for name in names:
            ws = found.get(name)
            if ws is None:
                cache.pop(name, None)
            elif name in cache:
                copy_into(cache[name], ws)
            else:
                cache[name] = ws

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

    def apply(self, changes: Sequence[WorkspaceChange]) -> dict[str, Written]:
        """Write ``changes`` (at most one per workspace) in one transaction; each
        workspace's row as written (new skip streaks, an automatic budget pause)."""
        if not changes:
            return {}
        with self.store.engine.begin() as conn:
            written = self._apply(conn, changes)
        self._adopt(written)
        return written

    def pause(self, workspace: str, reason: str, at: datetime) -> WorkspaceState:
        """Pause ``workspace`` (a user's command: its reason replaces any other)."""
        values = {"paused": True, "paused_reason": reason, "paused_at": at}
        with self.store.engine.begin() as conn:
            stmt = upsert_insert(conn.dialect.name, heartbeat_workspaces)
            stmt = stmt.values(workspace=workspace, **values).on_conflict_do_update(
                index_elements=[heartbeat_workspaces.c.workspace], set_=values
            )
            row = conn.execute(stmt.returning(*self._columns())).one()
        ws = WorkspaceState(*row)
        self._adopt({workspace: Written(ws)})
        return ws

    def resume(
        self, workspace: str, lift_budget: Callable[[WorkspaceState], bool]
    ) -> WorkspaceState:
        """Resume ``workspace``; when ``lift_budget`` says so of the stored row (read
        under its lock), today's spend is forgotten as well (resume lifts a budget stop)."""
        t = heartbeat_workspaces
        with self.store.engine.begin() as conn:
            query = select(*self._columns()).where(t.c.workspace == workspace)
            if conn.dialect.name == "postgresql":
                query = query.with_for_update()
            found = conn.execute(query).first()
            if found is None:
                return WorkspaceState(workspace=workspace)
            values: dict[str, Any] = {"paused": False, "paused_reason": None, "paused_at": None}
            if lift_budget(WorkspaceState(*found)):
                values.update(budget_day=None, tokens_today=0, cost_today=0.0)
            row = conn.execute(
                update(t)
                .where(t.c.workspace == workspace)
                .values(values)
                .returning(*self._columns())
            ).one()
        ws = WorkspaceState(*row)
        self._adopt({workspace: Written(ws)})
        return ws

    def finish(
        self,
        finished: list[tuple[list[LedgerRow], WorkspaceChange]],
        entries: Sequence[EntryState] = (),
        *,
        then: Callable[[Any], None] | None = None,
    ) -> dict[str, Written]:
        """Ledger rows, the workspaces' changes and ``entries``, all in one transaction;
        the workspaces' rows as written.

        ``then(conn)`` runs last in the same transaction (the runner ends the unit's
        claim there: results and release commit together, one transaction less).
        """
        if not finished:
            return {}
        rows = [r.row() for batch, _ in finished for r in batch]
        with self.store.engine.begin() as conn:
            if rows:
                conn.execute(insert(heartbeat_runs), rows)
            written = self._apply(conn, [change for _, change in finished])
            self._write_streaks(conn)
            self._save_entries(conn, entries)
            if then is not None:
                then(conn)
        self._adopt(written)
        return written

    @staticmethod
    def _columns() -> list[Any]:
        return [heartbeat_workspaces.c[k] for k in _WS_FIELDS]

    def _adopt(self, written: dict[str, Written]) -> None:
        """The rows as written become the copies in memory (kept objects are updated
        in place: a cycle's inputs hold them)."""
        if self._ws is None:
            return
        for name, w in written.items():
            kept = self._ws.get(name)
            if kept is None:
                self._ws[name] = w.state
            elif kept is not w.state:
                copy_into(kept, w.state)

    def _apply(self, conn: Any, changes: Sequence[WorkspaceChange]) -> dict[str, Written]:
        """Merge ``changes`` into the stored rows: one statement per shape of change
        (the rows come back as stored), and one more per workspace whose check
        (``over_budget``, ``recycle``) says to act."""
        names = [c.workspace for c in changes]
        if len(set(names)) != len(names):
            raise ValueError("one change per workspace in a write")
        shapes: dict[tuple[str, ...], list[WorkspaceChange]] = {}
        for change in changes:
            if change.shape:
                shapes.setdefault(change.shape, []).append(change)
        stored: dict[str, WorkspaceState] = {}
        for shape, group in shapes.items():
            stmt = _merge_stmt(conn.dialect.name, shape)
            params = [c.values() for c in group]
            for r in conn.execute(stmt, params if len(params) > 1 else params[0]):
                stored[r[0]] = WorkspaceState(*r)
        t = heartbeat_workspaces
        out: dict[str, Written] = {}
        for change in changes:
            ws = stored.get(change.workspace)
            if ws is None:  # nothing to write
                continue
            paused = recycled = False
            if change.over_budget is not None and not ws.paused and change.over_budget(ws):
                stmt = (
                    update(t)
                    .where(t.c.workspace == change.workspace)
                    .values(paused=True, paused_reason="budget", paused_at=change.paused_at)
                )
                ws = WorkspaceState(*conn.execute(stmt.returning(*self._columns())).one())
                paused = True
            if change.recycle is not None and change.recycle(ws):
                stmt = (
                    update(t)
                    .where(t.c.workspace == change.workspace)
                    .values(
                        hb_session_prompts=0,
                        hb_session_generation=t.c.hb_session_generation + 1,
                    )
                )
                ws = WorkspaceState(*conn.execute(stmt.returning(*self._columns())).one())
                recycled = True
            out[change.workspace] = Written(ws, paused, recycled)
        return out

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
