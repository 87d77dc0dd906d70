"""The dashboard's read model: page-sized queries over the state store (sync).

Handlers call these through ``asyncio.to_thread``. Every list is filtered and
paginated in SQL (or over the heartbeat's in-memory workspace rows), so a page
costs the same with ten sessions or ten thousand.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import desc, func, select

from vikingbot.store.tables import audit_events, heartbeat_runs

if TYPE_CHECKING:
    from vikingbot.heartbeat.state import WorkspaceState
    from vikingbot.store.db import StateStore

PER_PAGE = 50


@dataclass
class Page:
    rows: list[Any]
    page: int
    pages: int
    total: int


def paginate(items: list[Any], page: int, per_page: int = PER_PAGE) -> Page:
    pages = max(1, -(-len(items) // per_page))
    page = min(max(1, page), pages)
    return Page(items[(page - 1) * per_page : page * per_page], page, pages, len(items))


@dataclass
class DayUsage:
    day: date
    calls: int = 0
    tokens: int = 0
    cost: float = 0.0


def usage_by_day(store: StateStore, today: date, tz: Any, days: int = 14) -> list[DayUsage]:
    """Model calls, tokens and cost of heartbeat runs per day (heartbeat timezone)."""
    first = today - timedelta(days=days - 1)
    since = datetime.combine(first, datetime.min.time(), tzinfo=tz) - timedelta(days=1)
    t = heartbeat_runs
    query = select(t.c.at, t.c.model_calls, t.c.tokens_in, t.c.tokens_out, t.c.cost_usd).where(
        t.c.at >= since, t.c.decision == "run"
    )
    out = {first + timedelta(days=i): DayUsage(first + timedelta(days=i)) for i in range(days)}
    with store.engine.connect() as conn:
        for at, calls, tin, tout, cost in conn.execute(query):
            slot = out.get(at.astimezone(tz).date())
            if slot is not None:
                slot.calls += calls or 0
                slot.tokens += (tin or 0) + (tout or 0)
                slot.cost += cost or 0.0
    return list(out.values())


@dataclass
class CycleCounts:
    cycle_id: str | None = None
    at: datetime | None = None
    by_decision: Counter[str] = field(default_factory=Counter)
    by_reason: Counter[str] = field(default_factory=Counter)


def last_cycle(store: StateStore) -> CycleCounts:
    """Counts by decision and by reason of the newest cycle in the ledger."""
    t = heartbeat_runs
    with store.engine.connect() as conn:
        newest = conn.execute(select(t.c.cycle_id, t.c.at).order_by(desc(t.c.id)).limit(1)).first()
        if newest is None:
            return CycleCounts()
        counts = CycleCounts(newest.cycle_id, newest.at)
        grouped = conn.execute(
            select(t.c.decision, t.c.reason, func.count())
            .where(t.c.cycle_id == newest.cycle_id)
            .group_by(t.c.decision, t.c.reason)
        )
        for decision, reason, n in grouped:
            counts.by_decision[decision] += n
            counts.by_reason[reason] += n
    return counts


RUN_FILTERS = ("workspace", "decision", "reason", "outcome")


def runs(store: StateStore, filters: dict[str, str], page: int, tz: Any) -> Page:
    """The ledger, newest first, filtered by exact workspace/decision/reason/outcome and day."""
    t = heartbeat_runs
    where = [getattr(t.c, k) == v for k, v in filters.items() if k in RUN_FILTERS and v]
    day = _parse_day(filters.get("date", ""))
    if day is not None:
        start = datetime.combine(day, datetime.min.time(), tzinfo=tz)
        where += [t.c.at >= start, t.c.at < start + timedelta(days=1)]
    with store.engine.connect() as conn:
        return _newest_first(conn, t, where, page)


def distinct_values(store: StateStore, column: str, limit: int = 100) -> list[str]:
    col = getattr(heartbeat_runs.c, column)
    with store.engine.connect() as conn:
        return sorted(
            v for (v,) in conn.execute(select(col).distinct().limit(limit)) if v is not None
        )


def audit(store: StateStore, action: str, page: int) -> tuple[Page, list[str]]:
    t = audit_events
    where = [t.c.action == action] if action else []
    with store.engine.connect() as conn:
        found = _newest_first(conn, t, where, page)
        actions = sorted(a for (a,) in conn.execute(select(t.c.action).distinct()) if a)
    return found, actions


def _newest_first(conn: Any, t: Any, where: list[Any], page: int) -> Page:
    """One page of ``t``'s rows matching ``where``, newest first (page clamped to range)."""
    total = int(conn.execute(select(func.count()).select_from(t).where(*where)).scalar_one())
    pages = max(1, -(-total // PER_PAGE))
    page = min(max(1, page), pages)
    rows = [
        dict(r)
        for r in conn.execute(
            select(t)
            .where(*where)
            .order_by(desc(t.c.at), desc(t.c.id))
            .limit(PER_PAGE)
            .offset((page - 1) * PER_PAGE)
        ).mappings()
    ]
    return Page(rows, page, pages, total)


def _parse_day(text: str) -> date | None:
    try:
        return date.fromisoformat(text.strip()) if text.strip() else None
    except ValueError:
        return None


WS_STATES = ("", "paused", "parked", "run", "skip", "never")


_LISTING: dict[Path, tuple[int, list[str]]] = {}


def workspace_names(root: Path) -> list[str]:
    """Workspace folder names, sorted; re-listed only when the folder changed (its mtime:
    adding, removing or renaming a workspace changes it)."""
    import os

    try:
        stamp = os.stat(root).st_mtime_ns
    except OSError:
        return []
    cached = _LISTING.get(root)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        with os.scandir(root) as it:
            names = sorted(
                e.name for e in it if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
            )
    except OSError:
        return []
    _LISTING[root] = (stamp, names)
    return names


def workspace_rows(
    names: list[str],
    states: dict[str, WorkspaceState],
    parked: set[str],
    q: str,
    state: str,
    page: int,
) -> Page:
    """Workspaces with their last decision, filtered by name and state, one page."""
    q = q.strip().lower()
    rows = []
    for name in names:  # the folders that exist (a removed workspace's state is history)
        if q and q not in name.lower():
            continue
        ws = states.get(name)
        if state == "paused" and not (ws and ws.paused):
            continue
        if state == "parked" and name not in parked:
            continue
        if state in ("run", "skip") and not (ws and ws.last_decision == state):
            continue
        if state == "never" and ws is not None and ws.last_run_at is not None:
            continue
        rows.append((name, ws))
    return paginate(rows, page)


def parked_workspaces(store: StateStore) -> set[str]:
    from vikingbot.store.tables import heartbeat_entries as t

    with store.engine.connect() as conn:
        query = select(t.c.workspace).where(t.c.parked_reason.is_not(None)).distinct()
        return {w for (w,) in conn.execute(query)}


def entry_states(store: StateStore, workspace: str) -> dict[str, dict[str, Any]]:
    from vikingbot.store.tables import heartbeat_entries as t

    with store.engine.connect() as conn:
        rows = conn.execute(select(t).where(t.c.workspace == workspace)).mappings()
        return {r["entry"]: dict(r) for r in rows}


def inbox_items(
    store: StateStore, *, unread_only: bool, slot: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Inbox items, newest first."""
    from vikingbot.store.tables import inbox as t

    query = select(t).order_by(desc(t.c.id)).limit(limit)
    if unread_only:
        query = query.where(t.c.read_at.is_(None))
    if slot is not None:
        query = query.where(t.c.slot == slot)
    else:  # the marks chat replies leave for open pages are not results
        query = query.where(t.c.source.is_(None) | ~t.c.source.startswith("chat:"))
    with store.engine.connect() as conn:
        return [dict(r) for r in conn.execute(query).mappings()]


def slots(store: StateStore, limit: int = 50) -> list[tuple[str, int]]:
    """Inbox slots with their unread counts, busiest first."""
    from vikingbot.store.tables import inbox as t

    query = select(t.c.slot, func.count()).where(t.c.read_at.is_(None)).group_by(t.c.slot)
    with store.engine.connect() as conn:
        found: dict[str, int] = {s: int(n) for s, n in conn.execute(query)}
        every = [s for (s,) in conn.execute(select(t.c.slot).distinct().limit(limit))]
    return sorted(((s, int(found.get(s, 0))) for s in every), key=lambda x: (-x[1], x[0]))


def entry_states_for(store: StateStore, names: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """Entry state rows of a page of workspaces, in one query."""
    from vikingbot.store.tables import heartbeat_entries as t

    if not names:
        return {}
    with store.engine.connect() as conn:
        rows = conn.execute(select(t).where(t.c.workspace.in_(names))).mappings()
        return {(r["workspace"], r["entry"]): dict(r) for r in rows}
