"""Deciding, without any I/O or model call, what a cycle does for one workspace.

``plan_workspace`` is pure: it takes what the service read (sessions, the
parsed HEARTBEAT.md, stored state, the time) and returns one ``Decision`` per
session, workspace or entry, each with a stable reason code. The service
executes the ``run`` decisions; ``vikingbot heartbeat plan`` prints them all.

Reason codes (skips): disabled, quiet-hours, skip-flag, stale, no-sessions,
paused, budget, empty, unreadable, busy, parked, pending, not-due, and at run
time no-work, unchanged. Reasons for runs: due, manual, continuation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from vikingbot.config.schema import HeartbeatConfig
from vikingbot.heartbeat.schedule import is_due, next_due
from vikingbot.heartbeat.state import EntryState, WorkspaceState, text_hash
from vikingbot.heartbeat.types import Entry, ParseResult
from vikingbot.session.types import SessionMeta

UnitKind = Literal["checklist", "task", "scheduled"]
Trigger = Literal["scheduled", "manual"]

# A tick that comes a little early (timer jitter) still counts as on time.
CADENCE_SLACK = 0.05


@dataclass(frozen=True)
class Unit:
    """One agent turn to make."""

    kind: UnitKind
    entry: Entry | None = None
    session: SessionMeta | None = None  # fan-out target for target=all
    continuation: bool = False


@dataclass(frozen=True)
class Decision:
    workspace: str
    decision: Literal["run", "skip"]
    reason: str
    session: str | None = None
    entry: str | None = None
    unit: Unit | None = None
    detail: str | None = None
    next_due: datetime | None = None


@dataclass
class WorkspaceInput:
    name: str
    sessions: Sequence[SessionMeta]
    parsed: ParseResult | None  # None when not read (no eligible sessions)
    state: WorkspaceState
    entries: Mapping[str, EntryState] = field(default_factory=dict)
    busy: bool = False
    memo_key: Any = None  # what the decisions depend on (the service's quiet-workspace memo)


def session_skip(meta: SessionMeta, now: datetime, stale_after_s: float) -> str | None:
    """Why this session does not wake the heartbeat, or None when it is eligible."""
    if meta.skip_heartbeat:
        return "skip-flag"
    if meta.last_user_at is None or now - meta.last_user_at > timedelta(seconds=stale_after_s):
        return "stale"
    return None


def budget_exceeded(cfg: HeartbeatConfig, ws: WorkspaceState, today: str) -> bool:
    if ws.budget_day != today:
        return False
    b = cfg.budget
    if b.daily_tokens is not None and ws.tokens_today >= b.daily_tokens:
        return True
    return b.daily_cost_usd is not None and ws.cost_today >= b.daily_cost_usd


def in_progress(st: EntryState | None, now: datetime, cfg: HeartbeatConfig) -> bool:
    """A run of this entry started and has not ended (a crash leaves a stale mark:
    after the turn timeout plus a minute it no longer counts)."""
    if st is None or st.running_since is None:
        return False
    return now - st.running_since < timedelta(seconds=cfg.task_timeout_s + 60)


def is_parked(entry: Entry, st: EntryState | None) -> bool:
    """Parked while the file still carries the mark and the entry is unedited."""
    if entry.parked is None:
        return False
    return st is not None and st.parked_text_hash == text_hash(entry.text)


def plan_workspace(
    ws: WorkspaceInput,
    *,
    cfg: HeartbeatConfig,
    now: datetime,
    tz: ZoneInfo,
    trigger: Trigger,
    today: str,
) -> list[Decision]:
    name = ws.name
    out: list[Decision] = []
    eligible = []
    for meta in ws.sessions:
        why = session_skip(meta, now, cfg.stale_after)
        if why:
            out.append(Decision(name, "skip", why, session=str(meta.key)))
        else:
            eligible.append(meta)
    if not eligible:
        if not ws.sessions:
            out.append(Decision(name, "skip", "no-sessions"))
        return out

    def skip(reason: str, detail: str | None = None) -> list[Decision]:
        return [*out, Decision(name, "skip", reason, detail=detail)]

    if ws.state.paused:
        return skip("budget" if ws.state.paused_reason == "budget" else "paused")
    if budget_exceeded(cfg, ws.state, today):
        return skip("budget", "daily budget used up")
    parsed = ws.parsed
    if parsed is None or parsed.missing:
        return skip("empty", "no HEARTBEAT.md")
    if parsed.unreadable:
        return skip("unreadable", parsed.unreadable)
    if parsed.is_empty:
        return skip("empty")
    if ws.busy:
        return skip("busy", "the previous cycle for this workspace is still running")

    manual = trigger == "manual"
    interval = timedelta(seconds=cfg.interval_seconds)
    early = interval * CADENCE_SLACK

    def cadence_due(last: datetime | None) -> bool:
        return manual or last is None or now - last >= interval - early

    tasks = [e for e in parsed.tasks if not is_parked(e, ws.entries.get(e.key))]
    for e in parsed.tasks:
        if is_parked(e, ws.entries.get(e.key)):
            out.append(Decision(name, "skip", "parked", entry=e.key, detail=e.parked))

    if tasks and cfg.mode == "checklist":
        if not cadence_due(ws.state.last_checklist_at):
            nxt = (ws.state.last_checklist_at or now) + interval
            out.append(Decision(name, "skip", "not-due", detail="checklist", next_due=nxt))
        elif cfg.target == "all" and len(eligible) > 1:
            for meta in eligible:
                out.append(
                    Decision(
                        name,
                        "run",
                        "manual" if manual else "due",
                        session=str(meta.key),
                        unit=Unit("checklist", session=meta),
                    )
                )
        else:
            out.append(Decision(name, "run", "manual" if manual else "due", unit=Unit("checklist")))
    elif tasks:
        for e in tasks:
            st = ws.entries.get(e.key)
            if in_progress(st, now, cfg):
                out.append(Decision(name, "skip", "pending", entry=e.key))
            elif not cadence_due(st.last_fired if st else None):
                last = st.last_fired if st and st.last_fired else now
                out.append(Decision(name, "skip", "not-due", entry=e.key, next_due=last + interval))
            else:
                out.append(
                    Decision(
                        name,
                        "run",
                        "manual" if manual else "due",
                        entry=e.key,
                        unit=Unit("task", e),
                    )
                )

    for e in parsed.scheduled:
        st = ws.entries.get(e.key)
        assert e.schedule is not None
        if is_parked(e, st):
            out.append(Decision(name, "skip", "parked", entry=e.key, detail=e.parked))
            continue
        if in_progress(st, now, cfg):
            out.append(Decision(name, "skip", "pending", entry=e.key))
            continue
        if st is not None and st.continue_next:
            out.append(
                Decision(
                    name,
                    "run",
                    "continuation",
                    entry=e.key,
                    unit=Unit("scheduled", e, continuation=True),
                )
            )
            continue
        first_seen = st.first_seen if st else now
        last_fired = st.last_fired if st else None
        if is_due(e.schedule, first_seen, last_fired, now + early, tz):
            detail = None
            if e.only_if:  # a plan never runs checkers: it says who decides
                scope = f":{e.only_if[1]}" if e.only_if[1] else ""
                detail = f"only-if {e.only_if[0]}{scope} decides at run time"
            out.append(
                Decision(name, "run", "due", entry=e.key, unit=Unit("scheduled", e), detail=detail)
            )
        else:
            out.append(
                Decision(
                    name,
                    "skip",
                    "not-due",
                    entry=e.key,
                    next_due=next_due(e.schedule, first_seen, last_fired, tz),
                    detail=e.schedule.describe(),
                )
            )
    return out
