"""Carrying out a workspace's heartbeat units: the effects around ``settle``.

Per unit: claim it (``hb:<workspace>:<unit>``; a second claimant records
``busy`` with the holder's name), ask the entry's checker, call the agent with
a timeout, deliver a result the agent did not send itself, then let the pure
``outcome.settle`` decide and commit what it says at once: the HEARTBEAT.md
moves, the entry's state, the ledger row, the workspace's tokens, the owner's
notices. A crash therefore repeats at most the units in flight. After the
units: recycle the dedicated heartbeat session, stop a workspace over budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.clock import Clock
from vikingbot.config.schema import CheckerConfig, Config, HeartbeatConfig
from vikingbot.delivery.types import SendStatus
from vikingbot.heartbeat.claims import Fence, Hold, Renewals
from vikingbot.heartbeat.notices import Notifier
from vikingbot.heartbeat.outage import (
    BACK_TEXT,
    NOTICE_WORKSPACE,
    PROVIDER_KEY,
    ProviderHealth,
    down_text,
)
from vikingbot.heartbeat.outcome import (
    CheckFacts,
    Ctx,
    Settlement,
    TurnFacts,
    fresh_state,
    settle,
    settle_check,
    settle_missed,
    unpark_moves,
)
from vikingbot.heartbeat.planner import budget_exceeded, is_parked, session_skip
from vikingbot.heartbeat.report import CycleReport, budget_text
from vikingbot.heartbeat.rewrite import Move, RewriteReport
from vikingbot.heartbeat.state import HeartbeatState, WorkspaceChange, Written, copy_into
from vikingbot.heartbeat.turn import Turns, run_identity
from vikingbot.heartbeat.types import (
    Decision,
    Entry,
    EntryState,
    LedgerRow,
    Unit,
    WorkspaceInput,
    WorkspaceState,
)
from vikingbot.session.types import SessionMeta
from vikingbot.store.leases import Claim, Held, LeaseLost, Leases

if TYPE_CHECKING:
    from vikingbot.metrics import Metrics


def unit_key(workspace: str, unit: Unit, after: str = "first") -> str:
    """The claim key of a unit: ``hb:<workspace>:<entry or checklist>`` and its slot.

    A ``daily:``/``cron:`` entry's slot is its scheduled instant (``:<slot>``). Any
    other unit (the checklist, a task, an ``every:`` entry, a continuation) is keyed
    by the run it follows, ``@<after>`` (see ``UnitRunner._after``): every gateway
    that read the same state asks for the same key, and once the unit ran (the key
    is marked done) a gateway that read the state before that run cannot run it
    again; a gateway that read it after computes the next key, and its plan says
    whether that one is due.

    A manual run (``run-now``, the dashboard's button) claims the same key as the
    scheduled unit it stands for, so two of them, or one beside a cycle, meet as
    ``busy`` in any process; it gives the key back when done instead of marking it
    done (``_uses_slot``), so the scheduled run still comes.
    """
    if unit.entry is None:
        who = f":{unit.session.key}" if unit.session is not None else ""
        return f"hb:{workspace}:checklist{who}@{after}"
    schedule = unit.entry.schedule
    if unit.slot is not None and schedule is not None and schedule.kind != "every":
        return f"hb:{workspace}:{unit.entry.ident}:{unit.slot.isoformat()}"
    return f"hb:{workspace}:{unit.entry.ident}@{after}"


def unit_prefix(workspace: str, entry: str) -> tuple[str, str]:
    """The starts of every claim key of ``entry`` (see ``unit_key``)."""
    return f"hb:{workspace}:{entry}:", f"hb:{workspace}:{entry}@"


@dataclass
class Cycle:
    """What the runner shares with the service for one cycle."""

    report: CycleReport
    trigger: str
    state: HeartbeatState
    notifier: Notifier
    health: ProviderHealth
    keep_row: Callable[[LedgerRow], bool]
    stopping: Callable[[], bool]
    tz: Any


Check = Callable[[str, str | None, Mapping[str, CheckerConfig]], Awaitable[Any]]
"""Run the checker configured as the name for the scope (``checkers.run_check`` with the
home's checker state folder and environment)."""


class UnitRunner:
    """One cycle's units, from what they use: the settings, the clock, the workspaces'
    folder, the turns, the checkers, the claims (``leases``, as ``owner``), metrics."""

    def __init__(
        self,
        cycle: Cycle,
        *,
        settings: Callable[[], Config],
        clock: Clock,
        workspace_root: Path,
        turns: Turns,
        check: Check,
        leases: Leases | None,
        owner: str,
        metrics: Metrics | None,
    ) -> None:
        self.cycle = cycle
        self.report = cycle.report
        self.settings = settings
        self.clock = clock
        self.workspace_root = workspace_root
        self.turns = turns
        self.check = check
        self.leases = leases
        self.owner = owner
        self.metrics = metrics
        self.cfg = settings().bot.heartbeat
        self.now = cycle.report.started_at  # the cycle's time keeps every entry on the rhythm
        self.renewals = Renewals(leases, self._lease_s()) if leases is not None else None

    # ------------------------------------------------------------ workspace

    async def run_workspace(self, wsin: WorkspaceInput, todo: list[Decision]) -> None:
        path = self.workspace_root / wsin.name
        eligible = [
            m for m in wsin.sessions if session_skip(m, self.now, self.cfg.stale_after) is None
        ]
        ran: list[LedgerRow] = []
        for d in todo:
            if self.cycle.stopping() or wsin.state.paused:
                break
            row = await self.run_unit(wsin, d, eligible, path)
            if row.decision == "run" and row.outcome != "busy":
                ran.append(row)
        if ran:
            await self._after_runs(wsin, ran)

    async def _after_runs(self, wsin: WorkspaceInput, ran: list[LedgerRow]) -> None:
        """Count the prompts into the heartbeat session; start a new session when the
        count (every gateway's, as stored) or the last turn's context says so."""
        change = WorkspaceChange(
            wsin.name,
            prompts=len(ran),
            recycle=lambda ws: self._should_recycle(ws.hb_session_prompts, ran),
        )
        written = await asyncio.to_thread(self.cycle.state.apply, [change])
        w = written[wsin.name]
        copy_into(wsin.state, w.state)
        if w.recycled:  # the count is back to 0 and this gateway alone starts the new one
            await self.turns.reset_session(wsin.name)
            logger.bind(workspace=wsin.name).info("heartbeat session recycled")

    def _should_recycle(self, prompts: int, ran: list[LedgerRow]) -> bool:
        if prompts >= self.cfg.session_max_prompts:
            return True
        window = self.settings().bot.agents.context_window
        last = ran[-1]
        if last.model_calls:
            return last.tokens_in / last.model_calls > self.cfg.session_context_ratio * window
        return False

    # ------------------------------------------------------------ unit

    async def run_unit(
        self, wsin: WorkspaceInput, d: Decision, eligible: list[SessionMeta], path: Path
    ) -> LedgerRow:
        unit = d.unit
        assert unit is not None
        row = LedgerRow(
            self.report.cycle_id,
            self.now,
            wsin.name,
            self.cycle.trigger,
            "run",
            d.reason,
            session=d.session,
            entry=unit.entry.ident if unit.entry else None,
        )
        key = unit_key(wsin.name, unit, self._after(wsin, unit))
        claim, held = await self._claim(key)
        if claim is not None and held is None:
            held = await self._ran_meanwhile(wsin, unit, path)
            if held is not None:
                await self._release(claim, used=False)
        if held is not None:  # only the ledger row: the holder writes the unit's state
            busy = replace(row, decision="skip", reason="busy", error=held)
            if self.metrics:
                self.metrics.heartbeat_skips.labels("busy").inc()
            if self.cycle.keep_row(busy):
                await asyncio.to_thread(self.cycle.state.record, [busy])
            self.report.rows.append(busy)
            return busy
        done: LedgerRow | None = None
        hold = Hold(claim) if claim is not None else None
        fence = Fence(self.leases, claim, self._lease_s())
        if self.renewals is not None:
            self.renewals.hold(fence)
        try:
            done = await self._run_claimed(wsin, unit, row, eligible, path, fence, hold)
            return done
        except LeaseLost as exc:  # another gateway took the unit over: its result stands
            logger.bind(workspace=wsin.name).warning("{}", exc)
            return replace(row, decision="skip", reason="busy", error=str(exc))
        finally:
            if self.renewals is not None:
                self.renewals.let_go(fence)
            if hold is None or not hold.ended:  # the unit's commit did not end it
                used = done is not None and _uses_slot(done)
                await self._release(claim, used=used)

    async def _run_claimed(
        self,
        wsin: WorkspaceInput,
        unit: Unit,
        row: LedgerRow,
        eligible: list[SessionMeta],
        path: Path,
        fence: Fence,
        hold: Hold | None = None,
    ) -> LedgerRow:
        waiting = self.cycle.health.waiting(self.clock.now())
        if waiting is not None:  # another unit of this cycle found the provider down
            return await self._commit_skip(
                wsin,
                replace(row, decision="skip", reason="provider-down", error=waiting),
                hold=hold,
            )
        ctx = self._ctx(wsin.name, row, unit.entry)
        entry = unit.entry
        st: EntryState | None = None
        moves: tuple[Move, ...] = ()
        context = None
        remembered = wsin.entries.get(entry.ident) if entry is not None else None
        if entry is not None:
            moves = unpark_moves(entry, wsin.entries.get(entry.ident))
            st = fresh_state(entry, wsin.entries.get(entry.ident), ctx)
            st = replace(st, last_outcome=None)  # running: says nothing of earlier runs
            grace = timedelta(seconds=self.cfg.missed_grace)
            st, missed = settle_missed(unit, st, ctx, grace)
            if missed is not None:
                st = replace(st, running_since=None)
                await self._save_entry(wsin, st)
                assert unit.slot is not None  # settle_missed skips only a slot
                late = f"{unit.slot:%Y-%m-%d %H:%M} UTC, found {ctx.now - unit.slot} later"
                skipped = replace(row, decision="skip", reason=missed, error=late)
                return await self._commit_skip(wsin, skipped, moves, hold=hold)
            if entry.only_if and not unit.continuation:
                check = await self._check(entry)
                st, skip = settle_check(unit, st, _facts_of(check), ctx)
                if skip is not None:
                    st = replace(st, running_since=None)
                    await self._save_entry(wsin, st)
                    skipped = replace(row, decision="skip", reason=skip, error=check.error)
                    return await self._commit_skip(wsin, skipped, moves, hold=hold)
                context = check.context
            await self._save_entry(wsin, st)
        run_id = None
        if st is not None and st.running_since is not None:
            key = unit_key(wsin.name, unit, self._after(wsin, unit))
            run_id = run_identity(key, st.running_since)
        facts = await self._prior_delivery(fence, run_id)  # a dead holder's turn got out
        if facts is None:
            facts = await self._turn(wsin, unit, eligible, path, context, fence, run_id, remembered)
        settlement = settle(unit, facts, st, ctx)
        await fence.check("record its result")  # a late finisher writes nothing
        return await self._commit(wsin, settlement, moves, entry, hold)

    def _ctx(self, workspace: str, row: LedgerRow, entry: Entry | None) -> Ctx:
        moves_sig = None
        if entry is not None and entry.only_if is not None:
            conf = self.cfg.checkers.get(entry.only_if[0])
            if conf is not None and conf.moves_signature is not None:
                moves_sig = tuple(conf.moves_signature)
        today = self.now.astimezone(self.cycle.tz).date()
        return Ctx(self.cfg, self.now, today, row.trigger, workspace, moves_sig, row)  # type: ignore[arg-type]

    # ------------------------------------------------------------ claims

    def _lease_s(self) -> float:
        return self.settings().bot.gateway.lease_s

    def _after(self, wsin: WorkspaceInput, unit: Unit) -> str:
        """The run a unit follows, as its claim key says it (``unit_key``)."""
        if unit.entry is None:
            last = wsin.state.last_checklist_at
            return last.isoformat() if last is not None else "first"
        st = wsin.entries.get(unit.entry.ident)
        if st is None or st.last_fired is None:
            return "first"
        more = f"+{st.continuations}" if unit.continuation else ""
        return st.last_fired.isoformat() + more

    async def _claim(self, key: str) -> tuple[Claim | None, str | None]:
        """(the claim, or None and why the unit is someone else's). The claim lasts
        ``bot.gateway.lease_s`` and is renewed while the unit runs (``Renewals``), so
        a dead gateway's unit moves on after about that long."""
        leases = self.leases
        if leases is None:
            return None, None
        got = await asyncio.to_thread(leases.claim, key, self.owner, self._lease_s())
        if isinstance(got, Held):
            return None, "this unit already ran" if got.done else f"held by {got.holder}"
        return got, None

    async def _ran_meanwhile(self, wsin: WorkspaceInput, unit: Unit, path: Path) -> str | None:
        """Why the unit, now claimed, is no longer due, or None.

        The plan was made from HEARTBEAT.md and the entry's state as read at the
        start of the cycle; another gateway may have run the entry since (a task
        completed and moved to Completed, a new ``last_fired``). Both are read
        again under the claim: the other gateway moved the file before it wrote
        the state, and wrote the state before it gave the claim up. A claim taken
        ahead read both already (``_finish``: the state in the claim's transaction,
        the file after it committed); the file is parsed again only when its
        identity changed (``parser.read_heartbeat``).
        """
        entry = unit.entry
        if not self._rechecks(unit):
            return None
        assert entry is not None
        active, st = await asyncio.to_thread(self._read_again, wsin.name, entry.ident, path)
        if not active:
            return "this unit already ran (the entry is no longer active)"
        before = wsin.entries.get(entry.ident)
        was = before.last_fired if before is not None else None
        if st is not None and st.last_fired != was:
            return "this unit already ran (on another gateway, after this cycle read it)"
        if st is not None:  # as stored: a run cut off keeps its start (its identity)
            wsin.entries = {**wsin.entries, entry.ident: st}
        return None

    def _rechecks(self, unit: Unit) -> bool:
        """Whether a claimed unit is read again before it runs (``_ran_meanwhile``)."""
        return (
            unit.entry is not None and self.leases is not None and (self.cycle.trigger != "manual")
        )

    def _read_again(self, workspace: str, ident: str, path: Path) -> tuple[bool, EntryState | None]:
        st = self.cycle.state.entry(workspace, ident)
        return self._still_listed(ident, path), st

    def _still_listed(self, ident: str, path: Path) -> bool:
        from vikingbot.heartbeat.parser import read_heartbeat

        parsed = read_heartbeat(path / "HEARTBEAT.md", max_bytes=self.cfg.max_file_bytes)
        return parsed.find(ident) is not None

    async def _release(self, claim: Claim | None, *, used: bool) -> None:
        leases = self.leases
        if leases is None or claim is None:
            return
        try:
            if used:
                await asyncio.to_thread(leases.mark_done, claim)
            else:
                await asyncio.to_thread(leases.release, claim)
        except Exception:
            logger.exception("could not release the heartbeat claim {}", claim.key)

    # ------------------------------------------------------------ commits

    async def _save_entry(self, wsin: WorkspaceInput, st: EntryState) -> None:
        await asyncio.to_thread(self.cycle.state.save_entry, st)
        wsin.entries = {**wsin.entries, st.entry: st}

    async def _commit_skip(
        self,
        wsin: WorkspaceInput,
        row: LedgerRow,
        moves: tuple[Move, ...] = (),
        *,
        hold: Hold | None = None,
    ) -> LedgerRow:
        await self._apply_moves(wsin.name, moves)
        metrics = self.metrics
        if metrics:
            metrics.heartbeat_skips.labels(row.reason).inc()
        change = WorkspaceChange(wsin.name, decision="skip", reason=row.reason, decided_at=self.now)
        recorded = [row] if self.cycle.keep_row(row) else []
        await self._finish(recorded, wsin.state, change, row, hold)
        self.report.rows.append(row)
        return row

    async def _finish(
        self,
        rows: list[LedgerRow],
        ws: WorkspaceState,
        change: WorkspaceChange,
        row: LedgerRow,
        hold: Hold | None,
        entries: list[EntryState] | None = None,
    ) -> Written:
        """The unit's ledger row and what it changes in its workspace's row, and the
        end of its claim, in one transaction (when the claims live in the same
        database as the state). ``ws`` becomes the row as written."""
        leases, state = self.leases, self.cycle.state
        end = None
        if hold is not None and leases is not None and leases.store is state.store:
            end = hold.end_in(leases, _uses_slot(row))

        def write() -> dict[str, Written]:
            return state.finish([(rows, change)], entries or [], then=end)

        written = (await asyncio.to_thread(write))[ws.workspace]
        if hold is not None and end is not None:
            hold.ended = True
        copy_into(ws, written.state)
        return written

    async def _commit(
        self,
        wsin: WorkspaceInput,
        s: Settlement,
        moves: tuple[Move, ...],
        entry: Entry | None,
        hold: Hold | None = None,
    ) -> LedgerRow:
        """Everything one unit's settlement says, written before the next unit starts."""
        row = s.row
        st = s.entry
        if st is not None and s.recheck and entry is not None:
            again = await self._check(entry)
            if not again.error:
                st = replace(st, signature=again.signature)
        all_moves = moves + s.moves
        change = self._account(wsin.name, row)
        self.cycle.keep_row(row)
        # The ledger row, the entry's and the workspace's state in one transaction,
        # then the file. Until the file is written the entry stays marked running:
        # a gateway killed in between leaves a mark that says a move is owed
        # (``drop_dead_marks``), not a unit to run again.
        owed = st is not None and bool(all_moves)
        written = [replace(st, running_since=self.now) if owed else st] if st else []
        over_budget = (await self._finish([row], wsin.state, change, row, hold, written)).paused
        await self._apply_moves(wsin.name, all_moves)
        if st is not None:
            if owed:
                await self._save_entry(wsin, st)
            else:
                wsin.entries = {**wsin.entries, st.entry: st}
        await self._provider_news(row)
        for notice in s.notices:
            await self.cycle.notifier.tell(
                notice.workspace, notice.key, notice.text, kind="heartbeat"
            )
        for key in s.resolved:
            await self.cycle.notifier.resolve(wsin.name, key)
        if over_budget:
            await self.cycle.notifier.tell(
                wsin.name, "budget", budget_text(wsin.name), kind="budget"
            )
        self._count(row)
        self.report.rows.append(row)
        return row

    def _account(self, workspace: str, row: LedgerRow) -> WorkspaceChange:
        """What a run changes in its workspace's row: today's tokens and cost, the
        cadence, the latest decision and run; and a budget stop when the row as
        written (every gateway's spend of the day) is over the budget."""
        today = self.now.astimezone(self.cycle.tz).date().isoformat()
        checklist = row.entry is None and row.trigger != "manual"  # manual: cadence stays
        return WorkspaceChange(
            workspace,
            day=today,
            tokens=row.tokens_in + row.tokens_out,
            cost=row.cost_usd,
            checklist_at=self.now if checklist and row.outcome != "provider-down" else None,
            decision="run",
            reason=row.reason,
            decided_at=self.now,
            outcome=row.outcome,
            ran_at=self.now,
            paused_at=self.now,
            over_budget=lambda ws: budget_exceeded(self.cfg, ws, today),
        )

    async def _apply_moves(self, workspace: str, moves: tuple[Move, ...]) -> None:
        if not moves:
            return
        from vikingbot.heartbeat.rewrite import apply_moves

        log = logger.bind(workspace=workspace)
        path = self.workspace_root / workspace / "HEARTBEAT.md"
        try:
            rep = await asyncio.to_thread(apply_moves, path, list(moves))
            log.info("HEARTBEAT.md: {}", describe_rewrite(rep))
        except Exception:
            log.exception("could not update HEARTBEAT.md; the entries stay as they are")

    async def _provider_news(self, row: LedgerRow) -> None:
        health, notifier = self.cycle.health, self.cycle.notifier
        if row.outcome == "provider-down":
            health.failed(self.clock.now(), row.error)
            await notifier.tell(
                NOTICE_WORKSPACE, PROVIDER_KEY, down_text(row.error), kind="provider"
            )
        elif row.model_calls and (health.answered() or not health.confirmed):
            health.confirmed = True  # after a restart: was an outage told before it?
            if await notifier.resolve(NOTICE_WORKSPACE, PROVIDER_KEY):
                await notifier.announce(NOTICE_WORKSPACE, BACK_TEXT)

    def _count(self, row: LedgerRow) -> None:
        m = self.metrics
        if m:
            m.heartbeat_runs.labels(row.outcome or "unknown").inc()
            m.model_calls.labels("heartbeat").inc(row.model_calls)
            m.tokens.labels("heartbeat", "in").inc(row.tokens_in)
            m.tokens.labels("heartbeat", "out").inc(row.tokens_out)
            m.turn_duration.labels("heartbeat").observe(row.duration_s or 0.0)
        logger.bind(workspace=row.workspace, entry=row.entry).info(
            "heartbeat {} -> {} ({} model calls)", row.reason, row.outcome, row.model_calls
        )

    async def _check(self, entry: Entry) -> Any:
        assert entry.only_if is not None
        name, scope = entry.only_if
        return await self.check(name, scope, self.cfg.checkers)

    # ------------------------------------------------------------ the turn

    async def _turn(
        self,
        wsin: WorkspaceInput,
        unit: Unit,
        eligible: list[SessionMeta],
        path: Path,
        context: str | None,
        fence: Fence,
        run_id: str | None = None,
        st: EntryState | None = None,
    ) -> TurnFacts:
        tasks: tuple[Entry, ...] = ()
        if unit.entry is None and wsin.parsed is not None:  # the checklist the plan read
            tasks = tuple(
                e for e in wsin.parsed.tasks if not is_parked(e, wsin.entries.get(e.ident))
            )
        return await self.turns.make(
            self.report.cycle_id,
            wsin.name,
            unit,
            eligible,
            path,
            context,
            run_id,
            fence=fence.check,
            tasks=tasks,
            state=st,
        )

    async def _prior_delivery(self, fence: Fence, run_id: str | None) -> TurnFacts | None:
        """The turn of a holder that died after delivering and before recording.

        Its sends are in the outbox under the run's keys (``turn.run_identity``: a
        run cut off keeps its identity); the unit is then settled on that result,
        not run again (a row still pending is sent by the outbox sweep). Only looked
        up when the claim was taken over from a holder whose lease ran out.
        """
        if fence.claim is None or fence.claim.fence == 1 or run_id is None:
            return None
        texts = await asyncio.to_thread(self.turns.delivered_before, run_id)
        if not texts:
            return None
        logger.info(
            "heartbeat unit {}: the previous holder delivered before it died; not run again",
            fence.claim.key,
        )
        delivered: SendStatus = "delivered"
        sends = tuple(delivered for _ in texts)
        return TurnFacts("reply", reply=texts[-1], sends=sends)


def _uses_slot(row: LedgerRow) -> bool:
    """A slot is used up by a scheduled run or a checker's skip, not by an outage, and
    not by a manual run (which shares the scheduled unit's key, ``unit_key``)."""
    return row.trigger != "manual" and "provider-down" not in (row.outcome, row.reason)


COMPLETING = frozenset({"delivered", "inboxed", "refused", "repeat", "completed"})


def drop_dead_marks(
    leases: Leases | None, inputs: list[WorkspaceInput]
) -> list[tuple[WorkspaceInput, EntryState]]:
    """Forget "running" marks whose unit nobody holds a claim on any more.

    A gateway that dies mid-turn leaves the entry marked running; its claim runs
    out after ``bot.gateway.lease_s``, and from then on the unit is free for
    whichever gateway plans it next (instead of ``pending`` until the turn
    timeout). One query, only when some entry carries a mark.

    Returns the marks of tasks whose run was recorded as completed but whose move
    to ``## Completed`` was not written (the gateway died in between): the caller
    owes that move (``settle_owed``), the task is not run again.
    """
    marked = [(w, st) for w in inputs for st in w.entries.values() if st.running_since]
    if leases is None or not marked:
        return []
    live = [h.key for h in leases.holders("hb:")]
    owed = []
    for wsin, st in marked:
        if not any(key.startswith(unit_prefix(wsin.name, st.entry)) for key in live):
            wsin.entries = {**wsin.entries, st.entry: replace(st, running_since=None)}
            if st.last_outcome in COMPLETING:
                owed.append((wsin, replace(st, running_since=None)))
    return owed


def settle_owed(
    cfg: HeartbeatConfig,
    workspace_root: Path,
    state: HeartbeatState,
    owed: list[tuple[WorkspaceInput, EntryState]],
    today: date,
) -> None:
    """Write the moves a dead gateway recorded but did not make (``drop_dead_marks``)."""
    from vikingbot.heartbeat.rewrite import Complete, Delete, apply_moves

    for wsin, st in owed:
        parsed = wsin.parsed
        entry = parsed.find(st.entry) if parsed is not None else None
        if entry is not None and not entry.scheduled:
            move: Move = (
                Delete(entry.ident, expect=entry.raw)
                if cfg.on_complete == "delete"
                else Complete(entry.ident, today, expect=entry.raw)
            )
            path = workspace_root / wsin.name / "HEARTBEAT.md"
            try:
                rep = apply_moves(path, [move])
                logger.bind(workspace=wsin.name).info(
                    "HEARTBEAT.md: {} (recorded by a gateway that died before it)",
                    describe_rewrite(rep),
                )
            except Exception:
                logger.bind(workspace=wsin.name).exception("could not update HEARTBEAT.md")
                continue
        state.save_entry(st)


def describe_rewrite(rep: RewriteReport) -> str:
    """A rewrite report in words, for the log."""
    words = {"Complete": "completed", "Delete": "deleted", "Park": "parked", "Unpark": "unparked"}
    parts = [f"{words.get(type(m).__name__, 'changed')} '{m.key}'" for m in rep.applied]
    parts += [f"left '{m.key}' as it is ({why})" for m, why in rep.skipped]
    return "; ".join(parts) or "nothing to change"


def _facts_of(check: Any) -> CheckFacts:
    return CheckFacts(check.has_work, check.signature, check.error)
