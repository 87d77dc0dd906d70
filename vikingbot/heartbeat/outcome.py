"""What a heartbeat unit's result means: one pure function, ``settle``.

The runner gathers the facts (what the checker said, how the turn ended, what
delivery did with the result) and carries out what ``settle`` returns: the
entry's new state, the HEARTBEAT.md moves, the ledger row, the notices for the
owner, whether to re-check the signature. No I/O here, no clock: ``now`` and
everything else come in as arguments, so every rule of spec sections 3 to 5 is
a table test (tests/heartbeat/test_settle.py).

Rules, in order:

- provider down (connection error, timeout, 429, 5xx at the provider): outcome
  ``provider-down``; no retry charged, nothing parked, the slot is not
  consumed and the stored signature is cleared, so the next try sees the news;
- failure (error or timeout): a retry is charged and the signature cleared;
  at ``max_retries`` the entry is parked and the owner told once; a checklist
  turn's failure is told once per run of failures;
- ``HEARTBEAT_KEEP`` (or a per-entry turn that hit the tool-call limit): kept;
  a scheduled entry continues on the next tick, parked after
  ``max_continuations`` in a row;
- otherwise (no-op or a result): a per-task entry completes (moved to
  Completed, or deleted); a scheduled entry's continuation count resets.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Literal

from vikingbot.config.schema import HeartbeatConfig
from vikingbot.delivery.types import SendStatus
from vikingbot.heartbeat.rewrite import Complete, Delete, Move, Park, Unpark
from vikingbot.heartbeat.types import (
    Entry,
    EntryState,
    LedgerRow,
    Outcome,
    Reason,
    Trigger,
    Unit,
    text_hash,
)
from vikingbot.replies import is_noop, strip_tokens, wants_keep

TurnEnd = Literal["reply", "failed", "timeout", "provider-down"]
ReplyKind = Literal["noop", "kept", "result"]


@dataclass(frozen=True)
class Notice:
    """Something to tell the owner once. ``key`` names the problem by content."""

    workspace: str
    key: str
    text: str


@dataclass(frozen=True)
class TurnFacts:
    """How a turn ended, as the runner observed it (the input to ``settle``)."""

    ended: TurnEnd
    reply: str | None = None
    error: str | None = None
    turn_limit: bool = False
    model_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    duration_s: float = 0.0
    wrote: bool = False
    tools_run: tuple[str, ...] = ()
    sends: tuple[SendStatus, ...] = ()  # one per delivery attempt, in order
    model: str | None = None  # "provider/model" that answered


@dataclass(frozen=True)
class Settlement:
    outcome: Outcome
    row: LedgerRow
    entry: EntryState | None = None
    moves: tuple[Move, ...] = ()
    notices: tuple[Notice, ...] = ()
    resolved: tuple[str, ...] = ()  # notice keys whose problem is over
    recheck: bool = False  # re-run the checker and store its signature (own write)


@dataclass(frozen=True)
class CheckFacts:
    has_work: bool
    signature: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Ctx:
    """What settle needs besides the facts: config, time, trigger, identity."""

    cfg: HeartbeatConfig
    now: datetime
    today: date  # in the heartbeat timezone (the Completed line's date)
    trigger: Trigger
    workspace: str
    moves_signature: tuple[str, ...] | None = None  # the checker's own-write tools
    base: LedgerRow | None = field(default=None)


def reply_kind(reply: str | None, *, turn_limit: bool, unit: Unit, ack_max_chars: int) -> ReplyKind:
    """No-op, kept (``HEARTBEAT_KEEP``; a per-entry turn cut at the tool limit), or a result."""
    if wants_keep(reply) or (turn_limit and unit.kind != "checklist"):
        return "kept"
    if is_noop(reply, ack_max_chars):
        return "noop"
    return "result"


def needs_reply_delivery(facts: TurnFacts, kind: ReplyKind) -> bool:
    """A result the agent did not send with the message tool still reaches the user."""
    return kind == "result" and not facts.sends and bool(strip_tokens(facts.reply or ""))


def checklist_notice_key(workspace: str) -> str:
    return f"checklist-failed:{workspace}"


def parked_notice_key(entry: Entry) -> str:
    return f"parked:{entry.key}:{text_hash(entry.text)}"


# ---------------------------------------------------------------- before the turn


def settle_check(
    unit: Unit, st: EntryState, check: CheckFacts, ctx: Ctx
) -> tuple[EntryState, Reason | None]:
    """After the entry's checker answered: (new state, skip reason or None to run).

    No work clears the stored signature (the same news coming back wakes the
    agent again); an unchanged signature skips; either way the slot is used.
    A changed signature is stored before the run.
    """
    if not check.has_work:
        return replace(st, last_fired=_fired(unit, st, ctx), signature=None), "no-work"
    if check.signature is not None and check.signature == st.signature:
        return replace(st, last_fired=_fired(unit, st, ctx)), "unchanged"
    if check.signature is not None:
        return replace(st, signature=check.signature), None
    return st, None


def settle_missed(
    unit: Unit, st: EntryState, ctx: Ctx, grace: timedelta
) -> tuple[EntryState, Reason | None]:
    """A ``daily:``/``cron:`` slot found more than ``grace`` after its time (the machine
    slept, the gateway was down) is not run late: the slot is used, the skip is
    ``missed``, and the entry waits for its next slot. ``every:`` entries, manual runs
    and continuations always run."""
    sched = unit.entry.schedule if unit.entry is not None else None
    if (
        unit.kind != "scheduled"
        or unit.continuation
        or unit.slot is None
        or ctx.trigger == "manual"
        or sched is None
        or sched.kind == "every"
        or ctx.now - unit.slot <= grace
    ):
        return st, None
    return replace(st, last_fired=unit.slot), "missed"


def _fired(unit: Unit, st: EntryState, ctx: Ctx) -> datetime | None:
    """The new ``last_fired``: the slot (scheduled), the cycle's time, or as it was
    (a continuation, and a manual run of any entry: ``run-now`` does not move a cadence
    or a schedule)."""
    if unit.kind == "scheduled":
        if unit.slot is not None:
            return unit.slot
        return st.last_fired if unit.continuation or ctx.trigger == "manual" else ctx.now
    if ctx.trigger == "manual":
        return st.last_fired
    return ctx.now


def unpark_moves(entry: Entry | None, st: EntryState | None) -> tuple[Move, ...]:
    """An edited (or un-marked) parked entry starts afresh: the mark goes."""
    if entry is None or entry.parked is None:
        return ()
    return (Unpark(entry.ident),)


def fresh_state(entry: Entry, st: EntryState | None, ctx: Ctx) -> EntryState:
    """The entry's state at the start of a run (a parked-then-edited entry is reset).

    ``running_since`` is the start of this run, or, when a run was cut off (a crash
    leaves it set; every settled run clears it), the start of that run: the repeat
    is the same run, and its deliveries keep their dedupe keys (``turn.run_identity``).
    """
    st = st or EntryState(ctx.workspace, entry.ident, first_seen=ctx.now)
    if entry.parked is not None or st.parked_reason is not None:
        st = replace(st, parked_reason=None, parked_text_hash=None, retries=0, continuations=0)
    return replace(st, running_since=st.running_since or ctx.now)


# ---------------------------------------------------------------- after the turn


def settle(unit: Unit, facts: TurnFacts, st: EntryState | None, ctx: Ctx) -> Settlement:
    """Everything that follows from one finished turn (see the module docstring)."""
    row = _row(facts, ctx)
    if facts.ended == "provider-down":
        return _provider_down(unit, facts, st, row)
    if facts.ended in ("failed", "timeout"):
        return _failed(unit, facts, st, ctx, row)
    kind = reply_kind(
        facts.reply, turn_limit=facts.turn_limit, unit=unit, ack_max_chars=ctx.cfg.ack_max_chars
    )
    resolved = (checklist_notice_key(ctx.workspace),) if unit.kind == "checklist" else ()
    if unit.entry is None or st is None:
        outcome = "kept" if kind == "kept" else _sent_outcome(facts, kind)
        return Settlement(outcome, replace(row, outcome=outcome), resolved=resolved)
    entry = unit.entry
    st = replace(st, running_since=None, retries=0, last_fired=_fired(unit, st, ctx))
    if kind == "kept":
        return _kept(unit, entry, facts, st, ctx, row)
    moves: tuple[Move, ...] = ()
    outcome = _sent_outcome(facts, kind)
    if unit.kind == "task":
        moves = (_complete(entry, ctx),)
        outcome = (
            outcome if outcome in ("delivered", "inboxed", "refused", "repeat") else "completed"
        )
    st = replace(st, continuations=0, continue_next=False, last_outcome=outcome)
    recheck = entry.only_if is not None and _own_write(facts, ctx)
    return Settlement(outcome, replace(row, outcome=outcome), st, moves, recheck=recheck)


def _row(facts: TurnFacts, ctx: Ctx) -> LedgerRow:
    base = ctx.base or LedgerRow("", ctx.now, ctx.workspace, ctx.trigger, "run", "due")
    return replace(
        base,
        decision="run",
        duration_s=facts.duration_s,
        error=facts.error,
        model_calls=facts.model_calls,
        tokens_in=facts.tokens_in,
        tokens_out=facts.tokens_out,
        cost_usd=facts.cost_usd,
        model=facts.model,
    )


def _sent_outcome(facts: TurnFacts, kind: ReplyKind) -> Outcome:
    """What delivery made of the turn's sends (the best that happened wins)."""
    for status in ("refused", "delivered", "inboxed", "repeat", "silent"):
        if status in facts.sends:
            return status  # type: ignore[return-value]
    if "failed" in facts.sends:
        return "failed"
    return "noop" if kind == "noop" else "completed"


def _provider_down(
    unit: Unit, facts: TurnFacts, st: EntryState | None, row: LedgerRow
) -> Settlement:
    new = None
    if st is not None:  # nothing charged, the slot stays due; the news is looked at again
        new = replace(st, running_since=None, signature=None, last_outcome="provider-down")
    return Settlement("provider-down", replace(row, outcome="provider-down"), new)


def _failed(
    unit: Unit, facts: TurnFacts, st: EntryState | None, ctx: Ctx, row: LedgerRow
) -> Settlement:
    outcome: Outcome = "timeout" if facts.ended == "timeout" else "failed"
    why = facts.error or outcome
    if unit.entry is None or st is None:
        text = (
            f"The heartbeat checklist in workspace {ctx.workspace} failed: {why}. "
            "It is tried again at the next interval; you hear again only after it worked once."
        )
        notice = Notice(ctx.workspace, checklist_notice_key(ctx.workspace), text)
        return Settlement(outcome, replace(row, outcome=outcome), notices=(notice,))
    entry = unit.entry
    retries = st.retries + 1
    st = replace(
        st,
        running_since=None,
        retries=retries,
        signature=None,  # a failed run clears the watermark: the next tick retries
        last_fired=_fired(unit, st, ctx),
        last_outcome=outcome,
    )
    if retries < ctx.cfg.max_retries:
        return Settlement(outcome, replace(row, outcome=outcome), st)
    reason = f"failed {retries} times: {why}"
    text = (
        f"Heartbeat entry '{entry.key}' in workspace {ctx.workspace} is parked after "
        f"{retries} failed runs ({why}). Edit the entry in HEARTBEAT.md, or run "
        f"`vikingbot heartbeat unpark '{entry.ident}'`, to run it again."
    )
    return _park(entry, st, ctx, row, reason, text)


def _kept(
    unit: Unit, entry: Entry, facts: TurnFacts, st: EntryState, ctx: Ctx, row: LedgerRow
) -> Settlement:
    if unit.kind != "scheduled":
        st = replace(st, last_outcome="kept")
        return Settlement("kept", replace(row, outcome="kept"), st)
    n = st.continuations + 1
    st = replace(st, continuations=n, continue_next=True, last_outcome="kept")
    if n < ctx.cfg.max_continuations:
        return Settlement("kept", replace(row, outcome="kept"), st)
    reason = f"asked to continue {n} times in a row"
    text = (
        f"Scheduled entry '{entry.key}' in workspace {ctx.workspace} is parked: it {reason}. "
        f"Edit the entry in HEARTBEAT.md, or run `vikingbot heartbeat unpark '{entry.ident}'`, "
        "to run it again."
    )
    return _park(entry, replace(st, continue_next=False), ctx, row, reason, text)


def _park(
    entry: Entry, st: EntryState, ctx: Ctx, row: LedgerRow, reason: str, text: str
) -> Settlement:
    st = replace(
        st, parked_reason=reason, parked_text_hash=text_hash(entry.text), last_outcome="parked"
    )
    notice = Notice(ctx.workspace, parked_notice_key(entry), text)
    return Settlement(
        "parked",
        replace(row, outcome="parked"),
        st,
        (Park(entry.ident, reason[:200]),),
        (notice,),
    )


def _complete(entry: Entry, ctx: Ctx) -> Move:
    # expect: only move the entry as this cycle read it (a note added meanwhile stays)
    if ctx.cfg.on_complete == "delete":
        return Delete(entry.ident, expect=entry.raw)
    return Complete(entry.ident, ctx.today, expect=entry.raw)


def _own_write(facts: TurnFacts, ctx: Ctx) -> bool:
    """Did this run do a write of its own that the checker would see?"""
    sent = any(s in ("delivered", "inboxed", "refused") for s in facts.sends)
    if ctx.moves_signature is not None:
        tools = set(facts.tools_run) | ({"message"} if sent else set())
        return bool(tools & set(ctx.moves_signature))
    return facts.wrote or sent
