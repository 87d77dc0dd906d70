"""Deciding, without any I/O or model call, what a cycle does for one workspace.

``plan_workspace`` is pure: it takes what the service read (sessions, the
parsed HEARTBEAT.md, stored state, the time) and returns one ``Decision`` per
session, workspace or entry, each with a stable reason code (``Reason`` in
types.py). The service executes the ``run`` decisions; ``vikingbot heartbeat
plan`` prints them all. Total: no input makes it raise (a schedule whose due
time cannot be computed is an ``invalid`` skip naming the problem).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from vikingbot.config.schema import HeartbeatConfig
from vikingbot.heartbeat.schedule import latest_slot, next_due
from vikingbot.heartbeat.types import (
    Decision,
    Entry,
    EntryState,
    ParseResult,
    Reason,
    Schedule,
    Trigger,
    Unit,
    UnitKind,
    WorkspaceInput,
    WorkspaceState,
    text_hash,
)
from vikingbot.session.types import SessionMeta

__all__ = [
    "CADENCE_SLACK",
    "Decision",
    "Trigger",
    "Unit",
    "UnitKind",
    "WorkspaceInput",
    "budget_exceeded",
    "checker_missing",
    "early_by",
    "in_progress",
    "is_parked",
    "keeps_workspace_visited",
    "ledger_name",
    "plan_workspace",
    "session_skip",
    "stands",
    "subject",
]

# A cycle that comes a little early (timer jitter) still counts as on time for the
# checklist cadence (unscheduled entries); a scheduled entry (``every:``, ``daily:``,
# ``cron:``) never runs before its due time: the gateway wakes for it (wakeups.py).
CADENCE_SLACK = 0.05
# A crashed holder's "running" mark (and claim) is stale after the turn timeout plus this.
CLAIM_MARGIN_S = 60.0
TERMINAL = "cli"  # the session type of `vikingbot chat`
CHECKLIST = "checklist"  # how listings name a workspace's unscheduled entries, run as one
NO_ENTRY = "no active entry"  # how run-now --entry's skip begins when a workspace lacks it


def early_by(cfg: HeartbeatConfig) -> timedelta:
    """How early a cycle may come and still run the checklist cadence on time."""
    return timedelta(seconds=cfg.interval_seconds) * CADENCE_SLACK


def keeps_workspace_visited(meta: SessionMeta) -> bool:
    """Whether this session's user, while fresh, makes its workspace worth a visit.

    Any session not flagged off, and a terminal session whatever its flag: the
    terminal cannot be pushed to, so `vikingbot chat` flags its sessions to keep
    heartbeat results out of them, but the person at the terminal is still around
    and the workspace's tasks still run (results go to the owner, else the inbox).
    """
    return not meta.skip_heartbeat or meta.key.type == TERMINAL


def stands(shared: bool, sessions: Iterable[SessionMeta]) -> bool:
    """Whether a workspace's ``HEARTBEAT.md`` holds standing orders: its scheduled
    entries run on their schedule however long ago anyone chatted.

    The shared workspace always (``shared``; also with no session at all: a new user
    who has not chatted yet); any other workspace while a session that is not
    flagged off uses it.
    """
    return shared or any(keeps_workspace_visited(m) for m in sessions)


def subject(d: Decision) -> str:
    """What a decision is about, as listings name it: its session, its entry, the
    workspace's ``checklist`` (unscheduled entries, run as one), else "" (the
    workspace as a whole)."""
    if d.session or d.entry:
        return d.session or d.entry or ""
    checklist = d.unit is not None and d.unit.kind == CHECKLIST
    return CHECKLIST if checklist or d.detail == CHECKLIST else ""


def ledger_name(row: Mapping[str, Any]) -> str:
    """What listings call a ledger row (the CLI's and the dashboard's runs): its entry,
    its session, the workspace's ``checklist`` for a run of neither, else "" (a skip of
    the workspace as a whole)."""
    named = row.get("entry") or row.get("session")
    if named:
        return str(named)
    return CHECKLIST if row.get("decision") == "run" else ""


def session_skip(meta: SessionMeta, now: datetime, stale_after_s: float) -> Reason | None:
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
    return now - st.running_since < timedelta(seconds=cfg.task_timeout_s + CLAIM_MARGIN_S)


def is_parked(entry: Entry, st: EntryState | None) -> bool:
    """Parked while the file still carries the mark and the entry is unedited."""
    if entry.parked is None:
        return False
    return st is not None and st.parked_text_hash == text_hash(entry.text)


@dataclass(frozen=True)
class _Ctx:
    name: str
    cfg: HeartbeatConfig
    now: datetime
    tz: ZoneInfo
    manual: bool
    entries: dict[str, EntryState]

    @property
    def run_reason(self) -> Reason:
        return "manual" if self.manual else "due"

    def cadence_due(self, last: datetime | None) -> bool:
        interval = timedelta(seconds=self.cfg.interval_seconds)
        return self.manual or last is None or self.now - last >= interval - early_by(self.cfg)

    def next_cadence(self, last: datetime | None) -> datetime:
        return (last or self.now) + timedelta(seconds=self.cfg.interval_seconds)


def plan_workspace(
    ws: WorkspaceInput,
    *,
    cfg: HeartbeatConfig,
    now: datetime,
    tz: ZoneInfo,
    trigger: Trigger,
    today: str,
    provider_down: str | None = None,
    entry: str | None = None,
) -> list[Decision]:
    """Every decision for one workspace.

    ``provider_down``: when set (the model provider is down and not yet due
    for another try), every run becomes a ``provider-down`` skip with this as
    its detail; nothing is charged and scheduled slots stay due.

    ``entry`` (with the ``manual`` trigger: ``run-now --entry``): only that entry is
    decided, and it runs now whatever its schedule (``only_entry``).
    """
    out, eligible = _sessions(ws, now, cfg)
    # standing orders: scheduled entries run whether or not anyone chatted lately, and
    # so does the shared workspace's checklist; staleness only keeps the checklist of
    # another workspace (a chat's own) asleep while nobody talks in it
    live = bool(eligible) or ws.shared or _terminal_fresh(ws, now, cfg)
    if not live and not stands(ws.shared, ws.sessions):
        if not ws.sessions:
            out.append(Decision(ws.name, "skip", "no-sessions"))
        return out
    why = _workspace_skip(ws, cfg, today)
    if why is not None:
        return [*out, Decision(ws.name, "skip", why[0], detail=why[1])]
    assert ws.parsed is not None  # _workspace_skip returns "empty" otherwise
    ctx = _Ctx(ws.name, cfg, now, tz, trigger == "manual", dict(ws.entries))
    if entry is not None:
        return [*out, *only_entry(ctx, ws.parsed, entry)]
    if live:
        out += _unscheduled(ctx, ws.parsed, ws.state, eligible)
    elif ws.parsed.tasks:
        out.append(Decision(ws.name, "skip", "stale", detail=CHECKLIST))
    out += [_scheduled(ctx, e) for e in ws.parsed.scheduled]
    if provider_down is not None:
        out = [_wait_for_provider(d, provider_down) for d in out]
    return out


def _sessions(
    ws: WorkspaceInput, now: datetime, cfg: HeartbeatConfig
) -> tuple[list[Decision], list[SessionMeta]]:
    out: list[Decision] = []
    eligible: list[SessionMeta] = []
    for meta in ws.sessions:
        why = session_skip(meta, now, cfg.stale_after)
        if why:
            out.append(Decision(ws.name, "skip", why, session=str(meta.key)))
        else:
            eligible.append(meta)
    return out, eligible


def _terminal_fresh(ws: WorkspaceInput, now: datetime, cfg: HeartbeatConfig) -> bool:
    """A terminal session with a recent user message (its skip flag aside)."""
    fresh_since = now - timedelta(seconds=cfg.stale_after)
    return any(
        meta.key.type == TERMINAL
        and meta.last_user_at is not None
        and meta.last_user_at >= fresh_since
        for meta in ws.sessions
    )


def _workspace_skip(
    ws: WorkspaceInput, cfg: HeartbeatConfig, today: str
) -> tuple[Reason, str | None] | None:
    if ws.state.paused:
        return ("budget" if ws.state.paused_reason == "budget" else "paused"), None
    if budget_exceeded(cfg, ws.state, today):
        return "budget", "daily budget used up"
    parsed = ws.parsed
    if parsed is None or parsed.missing:
        return "empty", "no HEARTBEAT.md"
    if parsed.unreadable:
        return "unreadable", parsed.unreadable
    if parsed.is_empty:
        return "empty", None
    if ws.busy:
        return "busy", "the previous cycle for this workspace is still running"
    return None


def _unscheduled(
    ctx: _Ctx, parsed: ParseResult, state: WorkspaceState, eligible: list[SessionMeta]
) -> list[Decision]:
    out: list[Decision] = []
    tasks: list[Entry] = []
    for e in parsed.tasks:
        if is_parked(e, ctx.entries.get(e.ident)):
            out.append(Decision(ctx.name, "skip", "parked", entry=e.ident, detail=e.parked))
        else:
            tasks.append(e)
    if not tasks:
        return out
    if ctx.cfg.mode == "checklist":
        return out + _checklist(ctx, state, eligible, tasks)
    return out + [_task(ctx, e) for e in tasks]


def _checklist(
    ctx: _Ctx, state: WorkspaceState, eligible: list[SessionMeta], tasks: list[Entry]
) -> list[Decision]:
    last = state.last_checklist_at
    # an entry never seen before (just written) runs at once, not one interval later
    new = any(e.ident not in ctx.entries for e in tasks)
    if not new and not ctx.cadence_due(last):
        nxt = ctx.next_cadence(last)
        return [Decision(ctx.name, "skip", "not-due", detail=CHECKLIST, next_due=nxt)]
    if ctx.cfg.target == "all" and len(eligible) > 1:
        return [
            Decision(
                ctx.name,
                "run",
                ctx.run_reason,
                session=str(meta.key),
                unit=Unit("checklist", session=meta),
            )
            for meta in eligible
        ]
    return [Decision(ctx.name, "run", ctx.run_reason, unit=Unit("checklist"))]


def _task(ctx: _Ctx, e: Entry) -> Decision:
    st = ctx.entries.get(e.ident)
    if in_progress(st, ctx.now, ctx.cfg):
        return Decision(ctx.name, "skip", "pending", entry=e.ident)
    last = st.last_fired if st else None
    if not ctx.cadence_due(last):
        return Decision(ctx.name, "skip", "not-due", entry=e.ident, next_due=ctx.next_cadence(last))
    return Decision(ctx.name, "run", ctx.run_reason, entry=e.ident, unit=Unit("task", e))


def _scheduled(ctx: _Ctx, e: Entry) -> Decision:
    st = ctx.entries.get(e.ident)
    skip: Callable[..., Decision] = lambda reason, **kw: Decision(  # noqa: E731
        ctx.name, "skip", reason, entry=e.ident, **kw
    )
    if is_parked(e, st):
        return skip("parked", detail=e.parked)
    if in_progress(st, ctx.now, ctx.cfg):
        return skip("pending")
    if e.only_if and e.only_if[0] not in ctx.cfg.checkers:
        return skip("checker-missing", detail=checker_missing(e.only_if[0], ctx.cfg))
    if st is not None and st.continue_next:
        unit = Unit("scheduled", e, continuation=True)
        return Decision(ctx.name, "run", "continuation", entry=e.ident, unit=unit)
    assert e.schedule is not None
    first_seen = st.first_seen if st else ctx.now
    last_fired = st.last_fired if st else None
    sched = e.schedule
    try:
        due = next_due(sched, first_seen, last_fired, ctx.tz)
        if ctx.now < due:  # never early
            return skip("not-due", next_due=due, detail=_with_skill(sched.describe(), e))
        slot = every_slot(sched, due, ctx.now) or latest_slot(sched, ctx.now, ctx.tz)
    except (ValueError, OverflowError) as exc:
        return skip("invalid", detail=f"{sched.describe()}: {_plain(exc)}")
    detail = None
    if e.only_if:  # a plan never runs checkers: it says who decides
        scope = f":{e.only_if[1]}" if e.only_if[1] else ""
        detail = f"only-if {e.only_if[0]}{scope} decides at run time"
    unit = Unit("scheduled", e, slot=slot)
    detail = _with_skill(detail, e)
    return Decision(ctx.name, "run", "due", entry=e.ident, unit=unit, detail=detail)


def every_slot(sched: Schedule, due: datetime, now: datetime) -> datetime | None:
    """What a due ``every:`` run counts as fired at: its due time while it is less than
    one period late (the rhythm keeps its own cadence, a run a second late does not push
    the next one a second later), else now (after sleep or downtime: one run, then the
    rhythm starts again from it). None for a clock-time schedule."""
    if sched.kind != "every" or not sched.every_s:
        return None
    return due if now - due < timedelta(seconds=sched.every_s) else now


def only_entry(ctx: _Ctx, parsed: ParseResult, name: str) -> list[Decision]:
    """``run-now --entry NAME``: that entry runs now, scheduled or not, and its schedule
    does not move (a manual run keeps ``last_fired``; outcome._fired). In checklist mode
    an unscheduled entry runs as the checklist it belongs to. Parked and running entries
    still skip; a workspace without it has an ``invalid`` skip listing its entries."""
    wanted = name.casefold()  # titles are unique ignoring case
    e = parsed.find(name) or next(
        (x for x in parsed.active if (x.title or x.key).casefold() == wanted), None
    )
    if e is None or e.error is not None:
        known = ", ".join(sorted({x.title or x.key for x in parsed.active})[:10]) or "none"
        why = f"{NO_ENTRY} {name!r} in HEARTBEAT.md (entries: {known})"
        return [Decision(ctx.name, "skip", "invalid", entry=name, detail=why)]
    st = ctx.entries.get(e.ident)
    if is_parked(e, st):
        return [Decision(ctx.name, "skip", "parked", entry=e.ident, detail=e.parked)]
    if in_progress(st, ctx.now, ctx.cfg):
        return [Decision(ctx.name, "skip", "pending", entry=e.ident)]
    if e.schedule is not None:
        unit = Unit("scheduled", e)  # no slot: the run uses none, the schedule stays
    elif ctx.cfg.mode == "checklist":
        detail = f"the checklist, with {e.ident}"
        return [Decision(ctx.name, "run", "manual", detail=detail, unit=Unit("checklist"))]
    else:
        unit = Unit("task", e)
    return [Decision(ctx.name, "run", "manual", entry=e.ident, unit=unit)]


def _with_skill(detail: str | None, e: Entry) -> str | None:
    """Plan shows which skill an entry's turn carries."""
    if not e.skill:
        return detail
    return f"{detail}; skill {e.skill}" if detail else f"skill {e.skill}"


def checker_missing(name: str, cfg: HeartbeatConfig) -> str:
    """Why an ``only-if: name`` entry does not run, and the fix."""
    from vikingbot.grammar import closest

    hint = closest(name, cfg.checkers, 0.6)
    known = ", ".join(sorted(cfg.checkers)) or "none"
    guess = f"did you mean only-if: {hint}? " if hint else ""
    return (
        f"only-if: {name} is not configured (checkers: {known}): {guess}"
        f"add bot.heartbeat.checkers.{name} (docs/checkers.md), or remove only-if:"
    )


def _plain(exc: Exception) -> str:
    if isinstance(exc, OverflowError):
        return "the next due time is beyond any calendar date"
    return str(exc)


def _wait_for_provider(d: Decision, detail: str) -> Decision:
    if d.decision != "run":
        return d
    return replace(d, decision="skip", reason="provider-down", detail=detail, unit=None)
