"""The heartbeat: wakes the agent on a schedule, with nobody watching.

A cycle lists sessions, groups them by workspace, reads each HEARTBEAT.md
(cached by mtime and size), asks the pure planner what to do, records every
decision in the run ledger, and runs the ``run`` decisions as agent turns,
concurrently across workspaces up to ``max_concurrency``. Cadence comes from
persisted state, so restarts neither starve nor double the heartbeat. When the
loop wakes (the interval cycle, a workspace's due time, a saved HEARTBEAT.md)
is wakeups.py's part.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger
from sqlalchemy.exc import SQLAlchemyError

from vikingbot.clock import NAP_CHECK_S, Clock, nap, wait_event
from vikingbot.config.schema import Config, HeartbeatConfig
from vikingbot.errors import StoreError
from vikingbot.fsutil import disk_problem
from vikingbot.heartbeat.notices import Notifier, SendNotice
from vikingbot.heartbeat.outage import ProviderHealth
from vikingbot.heartbeat.planner import budget_exceeded, plan_workspace
from vikingbot.heartbeat.report import CycleReport, budget_text
from vikingbot.heartbeat.runner import Check, Cycle, UnitRunner, drop_dead_marks, settle_owed
from vikingbot.heartbeat.scan import Scanner, is_quiet
from vikingbot.heartbeat.state import HeartbeatState, WorkspaceChange, Written, copy_into
from vikingbot.heartbeat.turn import Turns, heartbeat_session_key
from vikingbot.heartbeat.types import (
    Decision,
    EntryState,
    LedgerRow,
    ParseResult,
    Trigger,
    WorkspaceInput,
)
from vikingbot.heartbeat.wakeups import Wakeups
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey
from vikingbot.store.leases import Leases, default_owner

if TYPE_CHECKING:
    from vikingbot.metrics import Metrics
    from vikingbot.store.db import StateStore

__all__ = ["GLOBAL", "CycleReport", "HeartbeatService", "budget_text"]

GLOBAL = "*"
STORE_RETRY_S = 2.0  # while the state database is away, look again this often
JOIN_POLL_S = 2.0  # several gateways: look this often for a cycle another one started


class HeartbeatService:
    """The heartbeat, from its parts (``gateway/compose.heartbeat`` wires them): the
    settings getter, the state store, the sessions, the clock, the workspaces' folder,
    the user's skills folder, the turns (:class:`~vikingbot.heartbeat.turn.Turns`), a
    checker runner, how to tell the owner (``send_notice(text, dedupe_key)``), and the
    claims (``leases``, as ``owner``; None: one process, no claims). Each of its pieces
    (scanner, unit runner, turns) gets only what it uses."""

    def __init__(
        self,
        settings: Callable[[], Config],
        *,
        store: StateStore,
        sessions: SessionStore,
        clock: Clock,
        workspace_root: Path,
        user_skills: Path,
        turns: Turns,
        check: Check,
        send_notice: SendNotice,
        leases: Leases | None = None,
        owner: str | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.workspace_root = workspace_root
        self.turns = turns
        self.check = check
        self.leases = leases
        self.owner = owner or default_owner()
        self.metrics = metrics
        self.state = HeartbeatState(store)
        self.notifier = Notifier(store, send_notice, clock)
        self.health = ProviderHealth(self.cfg.interval_seconds)
        self._busy: set[str] = set()
        self._wake = asyncio.Event()
        self.wakeups = Wakeups()  # when the loop looks again (due times, saves)
        self.nap_check_s = NAP_CHECK_S  # how soon a suspended machine's wake is noticed
        # held from a cycle's planning until its runs are marked busy: two cycles at
        # once (two run-nows, or one beside the scheduled cycle) each see the other's
        # runs as busy instead of both planning to run the same workspace
        self._planning = asyncio.Lock()
        self.store_down_since: datetime | None = None  # /health says "degraded" meanwhile
        self._stopping = False
        # file -> (workspace, the problems last logged for it)
        self._logged: dict[str, tuple[str, frozenset[tuple[int | None, str]]]] = {}
        self.scanner = Scanner(
            settings,
            clock=clock,
            sessions=sessions,
            workspace_root=workspace_root,
            user_skills=user_skills,
            state=lambda: self.state,
            busy=self._busy,
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self._semaphore: asyncio.Semaphore | None = None  # shared by overlapping cycles
        self._sem_limit = 0
        self._joined: datetime | None = None  # the latest cycle this gateway ran or joined

    # ------------------------------------------------------------ basics

    @property
    def cfg(self) -> HeartbeatConfig:
        return self.settings().bot.heartbeat

    def tz(self) -> Any:
        from vikingbot.heartbeat.timezone import resolve_timezone

        return resolve_timezone(self.cfg.timezone)

    def now(self) -> datetime:
        return self.clock.now()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    # ------------------------------------------------------------ reading (scan.py)

    def read_file(self, path: Path | str) -> ParseResult:
        return self.scanner.read_file(path)

    def workspace_path(self, name: str) -> Path:
        return self.scanner.workspace_path(name)

    def collect(
        self, only: str | None = None, *, include_idle: bool = True
    ) -> list[WorkspaceInput]:
        return self.scanner.collect(only, include_idle=include_idle)

    # ------------------------------------------------------------ planning

    def active_window(self) -> tuple[str, str, str] | None:
        """(start, end, timezone) of ``bot.heartbeat.active_hours``, None when not set."""
        hours = self.cfg.active_hours
        if hours is None:
            return None
        from vikingbot.heartbeat.timezone import resolve_timezone

        return hours.start, hours.end, resolve_timezone(hours.timezone or self.cfg.timezone).key

    def quiet_hours(self) -> str | None:
        """``"quiet hours 22:00–08:00 Europe/Paris"`` when an active-hours window is set."""
        window = self.active_window()
        return f"quiet hours {window[1]}–{window[0]} {window[2]}" if window else None

    def global_skip(self, trigger: Trigger, force: bool) -> str | None:
        from vikingbot.heartbeat.schedule import in_active_hours

        if force:
            return None
        if not self.cfg.enabled:
            return "disabled"
        hours = self.cfg.active_hours
        if hours is not None:
            from vikingbot.heartbeat.timezone import resolve_timezone

            start, end = hours.parsed()
            tz = resolve_timezone(hours.timezone or self.cfg.timezone)
            if not in_active_hours(self.now(), start, end, tz):
                return "quiet-hours"
        return None

    def plan(
        self,
        trigger: Trigger = "scheduled",
        *,
        workspace: str | None = None,
        force: bool = False,
        include_idle: bool = True,
        entry: str | None = None,
    ) -> tuple[list[Decision], list[WorkspaceInput]]:
        """What a cycle would do now; no model call, no writes."""
        _, fresh, inputs = self._plan(
            trigger,
            workspace=workspace,
            force=force,
            include_idle=include_idle,
            memo=False,
            entry=entry,
        )
        return fresh, inputs

    def _plan(
        self,
        trigger: Trigger,
        *,
        workspace: str | None,
        force: bool,
        include_idle: bool,
        memo: bool,
        entry: str | None = None,
    ) -> tuple[list[Decision], list[Decision], list[WorkspaceInput]]:
        """(the kept decisions of quiet workspaces, freshly planned decisions, planner
        inputs).

        ``memo`` (the gateway's cycles): a quiet workspace (stale, template, no
        sessions) whose sessions and file are unchanged reuses its last decisions.
        """
        why = self.global_skip(trigger, force)
        if why:
            detail = self.quiet_hours() if why == "quiet-hours" else None
            return [], [Decision(GLOBAL, "skip", why, detail=detail)], []  # type: ignore[arg-type]
        inputs, reused = self.scanner.scan(workspace, include_idle=include_idle, memo=memo)
        owed = drop_dead_marks(self.leases, inputs)  # a dead gateway's turn: not "pending"
        if owed and memo:  # the gateway's cycle (not a plan): make the moves it owed
            day = self.now().astimezone(self.tz()).date()
            settle_owed(self.cfg, self.workspace_root, self.state, owed, day)
        now = self.now()
        tz = self.tz()
        today = now.astimezone(tz).date().isoformat()
        down = self.health.waiting(now)
        decisions: list[Decision] = []
        for wsin in inputs:
            mine = plan_workspace(
                wsin,
                cfg=self.cfg,
                now=now,
                tz=tz,
                trigger=trigger,
                today=today,
                provider_down=down,
                entry=entry,
            )
            decisions += mine
            if memo:
                if is_quiet(mine):
                    self.scanner.quiet[wsin.name] = mine
                else:
                    self.scanner.quiet.pop(wsin.name, None)
        if entry is not None:
            decisions = _where_entry_is(decisions, entry)
        return reused, decisions, inputs

    def problems(
        self,
        inputs: list[WorkspaceInput],
        decisions: list[Decision] = (),  # type: ignore[assignment]
    ) -> list[dict[str, Any]]:
        """Malformed entries, unreadable files, impossible schedules: for plan/status and the owner.

        ``text`` is the entry as written (the problem's identity for "told once").
        """
        out: list[dict[str, Any]] = []
        invalid: dict[str, list[Decision]] = defaultdict(list)
        for d in decisions:
            if d.reason in ("invalid", "checker-missing") and d.entry:
                invalid[d.workspace].append(d)
        for wsin in inputs:
            parsed = wsin.parsed
            if parsed is None or not (parsed.unreadable or parsed.errors or wsin.name in invalid):
                continue
            path = str(self.workspace_path(wsin.name) / "HEARTBEAT.md")
            if parsed.unreadable:
                out.append(_problem(wsin.name, path, None, parsed.unreadable, ""))
            for p in parsed.errors:
                out.append(_problem(wsin.name, path, p.line, p.message, p.raw))
            out += [_invalid(wsin.name, path, parsed, d) for d in invalid.get(wsin.name, ())]
        return out

    # ------------------------------------------------------------ cycles

    async def run_cycle(
        self,
        trigger: Trigger = "scheduled",
        *,
        workspace: str | None = None,
        force: bool = False,
        wait: bool = True,
        entry: str | None = None,
    ) -> CycleReport:
        """One cycle. With ``wait=False`` workspace runs continue in the background.
        ``entry`` (manual): only that entry, now, its schedule unmoved."""
        async with self._planning:
            report, tasks = await self._plan_and_start(trigger, workspace, force, entry)
        if tasks and wait:
            await asyncio.gather(*tasks, return_exceptions=True)
        return report

    async def _plan_and_start(
        self, trigger: Trigger, workspace: str | None, force: bool, entry: str | None = None
    ) -> tuple[CycleReport, list[asyncio.Task[None]]]:
        """Plan a cycle, record its skips and start its runs (each workspace marked busy)."""
        now = self.now()
        report = CycleReport(uuid.uuid4().hex[:12], trigger, now)
        if self.metrics:
            self.metrics.cycles.inc()
        # A manual run looks at every workspace afresh (no kept quiet decisions, every
        # HEARTBEAT.md checked now): the user may have saved the file a moment ago.
        memo = trigger != "manual"

        def prepare() -> tuple[list[Decision], list[Decision], list[WorkspaceInput]]:
            planned = self._plan(
                trigger,
                workspace=workspace,
                force=force,
                include_idle=False,
                memo=memo,
                entry=entry,
            )
            self._remember_entries(planned[2], now)
            self.state.load_streaks()  # for the skips' ledger rows (_record_skips)
            return planned

        reused, decisions, inputs = await asyncio.to_thread(prepare)
        report.decisions = decisions
        await self._tell_problems(inputs, decisions)
        self._count_skips(decisions, Counter(d.reason for d in reused))
        runs = await self._record_skips(report, decisions, inputs, trigger)
        cycle = Cycle(
            report,
            trigger,
            self.state,
            self.notifier,
            self.health,
            self.keep_row,
            lambda: self._stopping,
            self.tz(),
        )
        runner = UnitRunner(
            cycle,
            settings=self.settings,
            clock=self.clock,
            workspace_root=self.workspace_root,
            turns=self.turns,
            check=self.check,
            leases=self.leases,
            owner=self.owner,
            metrics=self.metrics,
        )
        tasks = [self._start(runner, wsin, todo) for wsin, todo in runs]
        return report, tasks

    def _count_skips(self, decisions: list[Decision], kept: Counter[str]) -> None:
        if not self.metrics:
            return
        # kept decisions (all skips) were recorded in the ledger when they were first made,
        # and count here as the skips of this cycle too
        counts: Counter[str] = Counter(d.reason for d in decisions if d.decision == "skip")
        counts.update(kept)
        for reason, n in counts.items():
            self.metrics.heartbeat_skips.labels(reason).inc(n)

    async def _record_skips(
        self,
        report: CycleReport,
        decisions: list[Decision],
        inputs: list[WorkspaceInput],
        trigger: str,
    ) -> list[tuple[WorkspaceInput, list[Decision]]]:
        """Ledger rows for the skips (streaks folded), new skip streaks; the runs to make.

        The streaks were loaded with the plan (``run_cycle``)."""
        by_ws: dict[str, list[Decision]] = defaultdict(list)
        for d in decisions:
            by_ws[d.workspace].append(d)
        skips: list[LedgerRow] = []
        changes: list[WorkspaceChange] = []
        runs: list[tuple[WorkspaceInput, list[Decision]]] = []
        inputs_by_name = {w.name: w for w in inputs}
        for name, ds in by_ws.items():
            skips += [r for d in ds if d.decision == "skip" for r in self._fold(report, d, trigger)]
            wsin = inputs_by_name.get(name)
            if wsin is None:
                continue
            todo = [d for d in ds if d.decision == "run"]
            if todo:
                runs.append((wsin, todo))
            elif (change := self._skip_streak(wsin, ds, report.started_at)) is not None:
                changes.append(change)

        def write() -> dict[str, Written]:
            self.state.record(skips)
            return self.state.apply(changes)

        written = await asyncio.to_thread(write)
        for name, w in written.items():
            copy_into(inputs_by_name[name].state, w.state)
            if w.paused:  # this write stopped it (another gateway's may have already)
                await self.notifier.tell(name, "budget", budget_text(name), kind="budget")
        report.rows.extend(skips)
        return runs

    def _skip_streak(
        self, wsin: WorkspaceInput, ds: list[Decision], now: datetime
    ) -> WorkspaceChange | None:
        """A workspace-level skip to note when it starts a new streak (else None); a
        budget skip of a workspace not yet paused stops it, when the row as written
        is still over the budget."""
        last = next((d for d in reversed(ds) if d.decision == "skip" and d.session is None), None)
        if last is None:
            return None
        ws = wsin.state
        stop = False
        if last.reason == "budget" and not ws.paused:  # the day only matters to a budget
            today = now.astimezone(self.tz()).date().isoformat()
            stop = budget_exceeded(self.cfg, ws, today)
        if not stop and ws.last_reason == last.reason and ws.last_decision == "skip":
            return None  # repeats of a streak cost nothing
        return WorkspaceChange(
            wsin.name,
            decision="skip",
            reason=last.reason,
            decided_at=now,
            paused_at=now if stop else None,
            over_budget=(lambda w: budget_exceeded(self.cfg, w, today)) if stop else None,
        )

    def _start(
        self, runner: UnitRunner, wsin: WorkspaceInput, todo: list[Decision]
    ) -> asyncio.Task[None]:
        sem = self._sem()
        self._busy.add(wsin.name)

        async def one() -> None:
            async with sem:
                try:
                    await runner.run_workspace(wsin, todo)
                except Exception:
                    logger.bind(workspace=wsin.name).exception("heartbeat run failed")
                finally:
                    await self._absorb(wsin.name)
                    self._busy.discard(wsin.name)
                    if self.wakeups.finished(wsin.name, self.now()):
                        self._wake.set()  # a due time passed while it ran

        task = asyncio.create_task(one(), name=f"heartbeat:{wsin.name}")
        self._track(task)
        return task

    def _sem(self) -> asyncio.Semaphore:
        limit = self.cfg.max_concurrency
        sem = self._semaphore
        if sem is None or self._sem_limit != limit:
            sem = self._semaphore = asyncio.Semaphore(limit)
            self._sem_limit = limit
        return sem

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _remember_entries(self, inputs: list[WorkspaceInput], now: datetime) -> None:
        """Store when each entry was first seen (a new scheduled entry waits one interval)."""
        new = []
        for wsin in inputs:
            if wsin.parsed is None:
                continue
            for e in wsin.parsed.active:
                if e.ident not in wsin.entries:
                    st = EntryState(wsin.name, e.ident, first_seen=now)
                    wsin.entries = {**wsin.entries, e.ident: st}
                    new.append(st)
        self.state.add_entries(new)  # never over a row another gateway wrote meanwhile

    async def _absorb(self, workspace: str) -> None:
        """After a run: the entries its file holds now are seen (first_seen now, rows
        already there kept). An entry the turn itself wrote or reworded is then not "new"
        to the look its save brings, so an agent that edits its own checklist does not
        start the next turn at once (a loop); the interval paces it."""

        def absorb() -> None:
            parsed = self.read_file(self.workspace_path(workspace) / "HEARTBEAT.md")
            now = self.now()
            self.state.add_entries([EntryState(workspace, e.ident, now) for e in parsed.active])

        try:
            await asyncio.to_thread(absorb)
        except (StoreError, SQLAlchemyError, OSError) as exc:
            logger.bind(workspace=workspace).warning("heartbeat: entries not noted: {}", exc)

    def _fold(self, report: CycleReport, d: Decision, trigger: str) -> list[LedgerRow]:
        """A ledger row for a skip, unless it repeats the previous decision for that subject."""
        row = LedgerRow(
            cycle_id=report.cycle_id,
            at=report.started_at,
            workspace=d.workspace,
            trigger=trigger,
            decision="skip",
            reason=d.reason,
            session=d.session,
            entry=d.entry,
            error=d.detail,
        )
        return [row] if self.keep_row(row) else []

    def keep_row(self, row: LedgerRow) -> bool:
        """Whether the ledger records this row (skip streaks are folded: state.py)."""
        return self.state.keep_row(row)

    async def _tell_problems(self, inputs: list[WorkspaceInput], decisions: list[Decision]) -> None:
        """Each distinct problem once: keyed by the entry as written and the error, so the
        same problem on another line (an entry added above it) is not news.

        The log has each file's problems once per change: a file whose problems are
        the ones already logged is quiet; an edit that moves, adds or fixes one logs
        its problems again (and a file fixed and broken again is news)."""
        found = self.problems(inputs, decisions)
        by_file: dict[str, tuple[str, frozenset[tuple[int | None, str]]]] = {}
        for p in found:
            _, sig = by_file.get(p["file"], ("", frozenset()))
            by_file[p["file"]] = (p["workspace"], sig | {(p["line"], p["error"])})
        if self._logged:  # looked at and clean now: its next problem is news
            seen = {w.name for w in inputs}
            for f, (ws, _) in list(self._logged.items()):
                if ws in seen and f not in by_file:
                    del self._logged[f]
        fresh = {f for f, v in by_file.items() if self._logged.get(f) != v}
        self._logged.update({f: by_file[f] for f in fresh})
        for p in found:
            where = f"{p['file']}:{p['line']}" if p["line"] else p["file"]
            if p["file"] in fresh:
                logger.bind(workspace=p["workspace"]).error(
                    "HEARTBEAT.md problem at {}: {}", where, p["error"]
                )
            await self.notifier.tell(
                p["workspace"],
                f"entry-error:{p['text']}:{p['error']}",
                f"HEARTBEAT.md problem in workspace {p['workspace']} ({where}): {p['error']}. "
                "The other entries still run; fix this one and it runs too.",
                kind="entry-error",
            )

    # ------------------------------------------------------------ the loop

    def _next_cycle_at(self) -> datetime:
        interval = timedelta(seconds=self.cfg.interval_seconds)
        last = (
            self.state.cycle_started(GLOBAL)
            if self._shared()
            else self.state.workspace(GLOBAL).last_cycle_at
        )
        if last is None:
            return self.now()
        return last + interval

    def _mark_cycle(self, at: datetime) -> None:
        self.state.mark_cycle(GLOBAL, at)

    async def run_forever(self, stop: asyncio.Event | None = None) -> None:
        """Cycle at ``interval_seconds`` from the persisted last cycle (at most one
        catch-up), and in between when a workspace falls due or a HEARTBEAT.md is saved."""
        stop = stop or asyncio.Event()
        logger.info("heartbeat loop started")
        try:
            await self._loop(stop)
        finally:
            await asyncio.to_thread(self.scanner.close)
        logger.info("heartbeat loop stopped")

    def _shared(self) -> bool:
        """Several gateways may share this database (PostgreSQL): join their cycles."""
        return self.leases is not None and self.store.backend == "postgresql"

    def _cycle_to_join(self, now: datetime) -> datetime | None:
        """A cycle another gateway started less than an interval ago that this one has
        not run: joining it spreads its units over the gateways (each claims what it
        can run, up to ``max_concurrency``)."""
        started = self.state.cycle_started(GLOBAL)
        if started is None or (self._joined is not None and started <= self._joined):
            return None
        if now - started >= timedelta(seconds=self.cfg.interval_seconds):
            return None
        return started

    async def _loop(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()

        def saved() -> None:  # from the watcher's thread
            loop.call_soon_threadsafe(self._saved)

        if not await asyncio.to_thread(self.scanner.watch, saved):
            logger.info("heartbeat: no file system events, polling for changes each cycle")
        while not stop.is_set() and not self._stopping:
            # before the first await: a wake (or stop) during the hops below is kept
            self._wake.clear()
            join = None
            try:  # the database may be away (PostgreSQL restart, network): wait, never die
                due = await asyncio.to_thread(self._next_cycle_at)
                now = self.now()
                if now >= due:
                    await asyncio.to_thread(self._mark_cycle, now)
                    self._joined = now
                elif self._shared():
                    join = await asyncio.to_thread(self._cycle_to_join, now)
                self._store_back()
            except (StoreError, SQLAlchemyError) as exc:
                await self._store_away(exc, stop)
                continue
            if now >= due or join is not None:
                if join is not None:
                    self._joined = join
                    logger.info("heartbeat: joining the cycle another gateway started")
                await self._cycle(None)  # the interval cycle: every workspace
                continue
            if await self._wake_cycles(now):
                continue
            wake_at = self.wakeups.next_at(due)
            wait_s = min((wake_at - now).total_seconds(), JOIN_POLL_S if self._shared() else 60.0)
            slept = await nap(self._wake, wait_s, self.clock, check_s=self.nap_check_s)
            if slept:
                logger.info("heartbeat: the machine slept about {:.0f} s; catching up", slept)

    def _saved(self) -> None:
        """A HEARTBEAT.md was written: look at it once the writes settle (wakeups.py)."""
        self.wakeups.saved(self.now())
        self._wake.set()

    async def _wake_cycles(self, now: datetime) -> bool:
        """The cycles due before the next interval cycle: what a save changed, then each
        workspace whose due time came. Whether any ran."""
        ran = False
        if self.wakeups.take_saved(now):
            logger.debug("heartbeat: HEARTBEAT.md saved; looking at what changed")
            await self._cycle(None)  # plans what changed (and what is not quiet)
            ran = True
        for name in sorted(self.wakeups.take_due(now)):
            await self._cycle(name)
            ran = True
        return ran

    async def _cycle(self, workspace: str | None) -> None:
        """A scheduled cycle (of one workspace, or of all that need planning); its
        decisions set when each workspace it planned is looked at next."""
        try:
            report = await self.run_cycle("scheduled", workspace=workspace, wait=False)
            self.wakeups.learn(report.decisions, self.tz())
        except Exception as exc:
            if disk_problem(exc):  # a full or read-only disk: one line, not a traceback
                logger.error("heartbeat cycle failed: {}: {}", disk_problem(exc), exc)
            else:
                logger.exception("heartbeat cycle failed")

    async def _store_away(self, exc: Exception, stop: asyncio.Event) -> None:
        """The state database is unreachable: say so once, retry every STORE_RETRY_S."""
        if self.store_down_since is None:
            self.store_down_since = self.now()
            logger.warning("heartbeat: state database unreachable, waiting for it: {}", exc)
        self._wake.clear()
        await wait_event(self._wake, STORE_RETRY_S)

    def _store_back(self) -> None:
        if self.store_down_since is not None:
            away = (self.now() - self.store_down_since).total_seconds()
            logger.info("heartbeat: state database back after {:.0f}s", away)
            self.store_down_since = None

    async def drain(self, timeout: float) -> None:
        """Wait for running workspace turns (shutdown), then cancel what is left."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()

    # ------------------------------------------------------------ user actions

    def pause(self, workspace: str, reason: str = "user") -> None:
        self.state.pause(workspace, reason, self.now())
        self.state.bump_generation(GLOBAL)  # a running gateway re-reads workspace rows

    def resume(self, workspace: str) -> None:
        today = self.now().astimezone(self.tz()).date().isoformat()
        # resume lifts today's budget stop: the day's spend is forgotten
        self.state.resume(workspace, lambda ws: budget_exceeded(self.cfg, ws, today))
        self.state.bump_generation(GLOBAL)
        self.notifier.forget_sync(workspace, "budget")

    def _all_files(self, workspace: str | None) -> list[WorkspaceInput]:
        """Every workspace's file and entry rows, fresh sessions or not (parked listing)."""
        root = self.workspace_root
        names = (
            [workspace]
            if workspace
            else sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
            if root.is_dir()
            else []
        )
        entries = self.state.all_entries()
        out = []
        for name in names:
            parsed = self.read_file(root / name / "HEARTBEAT.md")
            mine = {k: v for (w, k), v in entries.items() if w == name}
            out.append(WorkspaceInput(name, [], parsed, self.state.workspace(name), mine))
        return out

    def parked(self, workspace: str | None = None) -> list[dict[str, Any]]:
        """Parked entries of every workspace (or one), for `heartbeat parked`."""
        from vikingbot.heartbeat.parking import parked_entries

        return parked_entries(self._all_files(workspace), self.workspace_root)

    def unpark(self, name: str, workspace: str | None = None) -> dict[str, Any]:
        """Restore a parked entry (any reason): mark removed, counters reset, notice forgotten."""
        from vikingbot.heartbeat.outcome import parked_notice_key
        from vikingbot.heartbeat.parking import find_parked, unpark

        wsin, entry = find_parked(self._all_files(workspace), name, workspace)
        done = unpark(self.state, wsin, entry, self.workspace_root, self.now())
        self.notifier.forget_sync(wsin.name, parked_notice_key(entry))
        return done

    def heartbeat_session_key(self, workspace: str) -> SessionKey:
        return heartbeat_session_key(workspace)


def _where_entry_is(decisions: list[Decision], entry: str) -> list[Decision]:
    """``run-now --entry``: the decisions of the workspaces that have the entry; when none
    has it, one such "no entry" skip (it lists the entries there are)."""
    from vikingbot.heartbeat.planner import NO_ENTRY

    found = [d for d in decisions if (d.entry or d.unit or d.workspace == GLOBAL)]
    hits = [d for d in found if not (d.detail or "").startswith(NO_ENTRY)]
    return hits or found[:1] or decisions[:1]


def _invalid(workspace: str, path: str, parsed: ParseResult, d: Decision) -> dict[str, Any]:
    e = parsed.find(d.entry or "")
    line = e.line if e is not None else None
    raw = "\n".join(e.raw) if e is not None else (d.entry or "")
    return _problem(workspace, path, line, d.detail or "invalid", raw)


def _problem(workspace: str, file: str, line: int | None, error: str, text: str) -> dict[str, Any]:
    return {"workspace": workspace, "file": file, "line": line, "error": error, "text": text}
