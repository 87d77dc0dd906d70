"""The heartbeat: wakes the agent on a schedule, with nobody watching.

A cycle lists sessions, groups them by workspace, reads each HEARTBEAT.md
(cached by mtime and size), asks the pure planner what to do, records every
decision in the run ledger, and runs the ``run`` decisions as agent turns,
concurrently across workspaces up to ``max_concurrency``. Cadence comes from
persisted state, so restarts neither starve nor double the heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger
from sqlalchemy.exc import SQLAlchemyError

from vikingbot.config.schema import HeartbeatConfig
from vikingbot.errors import StoreError
from vikingbot.heartbeat.planner import (
    Decision,
    Trigger,
    WorkspaceInput,
    budget_exceeded,
    plan_workspace,
)
from vikingbot.heartbeat.scan import QUIET_REASONS, Scanner
from vikingbot.heartbeat.state import HeartbeatState, LedgerRow, WorkspaceState
from vikingbot.heartbeat.types import ParseResult
from vikingbot.session.types import SessionKey

if TYPE_CHECKING:
    from vikingbot.agent.types import AgentLoop
    from vikingbot.metrics import Metrics
    from vikingbot.runtime import Runtime

GLOBAL = "*"
STORE_RETRY_S = 2.0  # while the state database is away, look again this often


def budget_text(workspace: str) -> str:
    return (
        f"The heartbeat of workspace {workspace} is paused: its daily budget is used up. "
        f"`vikingbot heartbeat resume {workspace}` lifts the pause."
    )


@dataclass
class CycleReport:
    cycle_id: str
    trigger: str
    started_at: datetime
    decisions: list[Decision] = field(default_factory=list)
    rows: list[LedgerRow] = field(default_factory=list)  # one per run and per recorded skip
    # (ledger rows, new workspace state) per finished workspace, written at the cycle's end
    finished: list[tuple[list[LedgerRow], WorkspaceState]] = field(default_factory=list)

    def results(self) -> list[dict[str, Any]]:
        """The `run-now --json` contract: one object per decision."""
        out = []
        for r in self.rows:
            out.append(
                {
                    "workspace": r.workspace,
                    "session": r.session,
                    "entry": r.entry,
                    "decision": r.decision,
                    "reason": r.reason,
                    "outcome": r.outcome,
                    "model_calls": r.model_calls,
                    "tokens_in": r.tokens_in,
                    "tokens_out": r.tokens_out,
                    "cost_usd": r.cost_usd,
                    "duration_s": r.duration_s,
                    "error": r.error,
                }
            )
        return out


class HeartbeatService:
    def __init__(
        self,
        rt: Runtime,
        *,
        metrics: Metrics | None = None,
        agent: AgentLoop | None = None,
    ) -> None:
        self.rt = rt
        self.metrics = metrics
        self._agent = agent
        self._state: HeartbeatState | None = None
        self._busy: set[str] = set()
        self._wake = asyncio.Event()
        self.store_down_since: datetime | None = None  # /health says "degraded" meanwhile
        self._stopping = False
        self._folded: dict[tuple[str, str | None, str | None], str] = {}  # subject -> streak
        self.scanner = Scanner(rt, lambda: self.state, self._busy)
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------ basics

    @property
    def cfg(self) -> HeartbeatConfig:
        return self.rt.config.bot.heartbeat

    @property
    def state(self) -> HeartbeatState:
        if self._state is None:
            self._state = HeartbeatState(self.rt.store)
        return self._state

    def agent(self) -> AgentLoop:
        return self._agent if self._agent is not None else self.rt.agent()

    def tz(self) -> Any:
        from vikingbot.heartbeat.timezone import resolve_timezone

        return resolve_timezone(self.cfg.timezone)

    def now(self) -> datetime:
        return self.rt.clock.now()

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
    ) -> tuple[list[Decision], list[WorkspaceInput]]:
        """What a cycle would do now; no model call, no writes."""
        reused, fresh, inputs = self._plan(
            trigger, workspace=workspace, force=force, include_idle=include_idle, memo=False
        )
        return reused + fresh, inputs

    def _plan(
        self,
        trigger: Trigger,
        *,
        workspace: str | None,
        force: bool,
        include_idle: bool,
        memo: bool,
    ) -> tuple[list[Decision], list[Decision], list[WorkspaceInput]]:
        """(reused quiet decisions, freshly planned decisions, planner inputs).

        ``memo`` (the gateway's cycles): a quiet workspace (stale, template, no
        sessions) whose sessions and file are unchanged reuses its last decisions.
        """
        why = self.global_skip(trigger, force)
        if why:
            return [], [Decision(GLOBAL, "skip", why)], []
        inputs, reused = self.scanner.scan(workspace, include_idle=include_idle, memo=memo)
        now = self.now()
        tz = self.tz()
        today = now.astimezone(tz).date().isoformat()
        decisions: list[Decision] = []
        for wsin in inputs:
            mine = plan_workspace(wsin, cfg=self.cfg, now=now, tz=tz, trigger=trigger, today=today)
            decisions += mine
            if memo:
                if all(d.decision == "skip" and d.reason in QUIET_REASONS for d in mine):
                    self.scanner.quiet[wsin.name] = (wsin.memo_key, mine)
                else:
                    self.scanner.quiet.pop(wsin.name, None)
        return reused, decisions, inputs

    def problems(self, inputs: list[WorkspaceInput]) -> list[dict[str, Any]]:
        """Malformed entries and unreadable files, for plan/status and the owner."""
        out: list[dict[str, Any]] = []
        for wsin in inputs:
            parsed = wsin.parsed
            if parsed is None or not (parsed.unreadable or parsed.errors):
                continue
            path = self.workspace_path(wsin.name) / "HEARTBEAT.md"
            if parsed.unreadable:
                out.append(
                    {
                        "workspace": wsin.name,
                        "file": str(path),
                        "line": None,
                        "error": parsed.unreadable,
                    }
                )
            for p in parsed.errors:
                out.append(
                    {"workspace": wsin.name, "file": str(path), "line": p.line, "error": p.message}
                )
        return out

    # ------------------------------------------------------------ cycles

    async def run_cycle(
        self,
        trigger: Trigger = "scheduled",
        *,
        workspace: str | None = None,
        force: bool = False,
        wait: bool = True,
    ) -> CycleReport:
        """One cycle. With ``wait=False`` workspace runs continue in the background."""
        from vikingbot.heartbeat.runner import UnitRunner

        now = self.now()
        report = CycleReport(uuid.uuid4().hex[:12], trigger, now)
        if self.metrics:
            self.metrics.cycles.inc()
        reused, decisions, inputs = await asyncio.to_thread(
            lambda: self._plan(
                trigger, workspace=workspace, force=force, include_idle=False, memo=True
            )
        )
        report.decisions = reused + decisions
        await asyncio.to_thread(self._remember_entries, inputs, now)
        await self._tell_problems(inputs)
        if self.metrics:
            # reused decisions were recorded in the ledger when they were first made
            for reason, n in Counter(
                d.reason for d in report.decisions if d.decision == "skip"
            ).items():
                self.metrics.heartbeat_skips.labels(reason).inc(n)

        by_ws: dict[str, list[Decision]] = defaultdict(list)
        for d in decisions:
            by_ws[d.workspace].append(d)
        skips: list[LedgerRow] = []
        ws_updates: list[WorkspaceState] = []
        runs: list[tuple[WorkspaceInput, list[Decision]]] = []
        inputs_by_name = {w.name: w for w in inputs}
        today = now.astimezone(self.tz()).date().isoformat()
        for name, ds in by_ws.items():
            wsin = inputs_by_name.get(name)
            for d in ds:
                if d.decision == "skip":
                    row = self._fold(report, d, trigger)
                    if row is not None:
                        skips.append(row)
            if wsin is None:
                continue
            todo = [d for d in ds if d.decision == "run"]
            ws = wsin.state
            last_skip = next(
                (d for d in reversed(ds) if d.decision == "skip" and d.session is None), None
            )
            if todo:
                runs.append((wsin, todo))
            elif last_skip is not None:
                if (
                    last_skip.reason == "budget"
                    and not ws.paused
                    and budget_exceeded(self.cfg, ws, today)
                ):
                    ws.paused, ws.paused_reason, ws.paused_at = True, "budget", now
                    await self._notify(name, "budget", budget_text(name))
                    ws.last_decision = None  # force the write below
                if ws.last_reason != last_skip.reason or ws.last_decision != "skip":
                    # a new streak: written once; repeats of it cost nothing
                    ws.last_decision, ws.last_reason = "skip", last_skip.reason
                    ws.last_decision_at = now
                    ws_updates.append(ws)
        await asyncio.to_thread(self.state.record, skips)
        await asyncio.to_thread(self.state.save_workspaces, ws_updates)
        report.rows.extend(skips)

        runner = UnitRunner(self, report, trigger)
        sem = asyncio.Semaphore(self.cfg.max_concurrency)

        async def one(wsin: WorkspaceInput, todo: list[Decision]) -> None:
            async with sem:
                try:
                    await runner.run_workspace(wsin, todo)
                except Exception:
                    logger.bind(workspace=wsin.name).exception("heartbeat run failed")
                finally:
                    self._busy.discard(wsin.name)

        tasks = []
        for wsin, todo in runs:
            self._busy.add(wsin.name)
            task = asyncio.create_task(one(wsin, todo), name=f"heartbeat:{wsin.name}")
            self._track(task)
            tasks.append(task)

        async def finish() -> None:
            try:
                await asyncio.gather(*tasks, return_exceptions=True)
            finally:
                await asyncio.to_thread(self.state.finish, report.finished)

        if not tasks:
            return report
        if wait:
            await finish()
        else:
            self._track(asyncio.create_task(finish(), name="heartbeat:finish"))
        return report

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _remember_entries(self, inputs: list[WorkspaceInput], now: datetime) -> None:
        """Store when each entry was first seen (a new scheduled entry waits one interval)."""
        from vikingbot.heartbeat.state import EntryState

        new = []
        for wsin in inputs:
            if wsin.parsed is None:
                continue
            for e in wsin.parsed.active:
                if e.key not in wsin.entries:
                    st = EntryState(wsin.name, e.key, first_seen=now)
                    wsin.entries = {**wsin.entries, e.key: st}
                    new.append(st)
        self.state.save_entries(new)

    def _fold(self, report: CycleReport, d: Decision, trigger: str) -> LedgerRow | None:
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
        return row if self.keep_row(row) else None

    def keep_row(self, row: LedgerRow) -> bool:
        """Record a skip only when it starts a streak; record every run (and end the streak).

        A scheduled skip that repeats the subject's previous skip (same reason and
        detail) adds nothing a user could learn from, so it is folded away.
        """
        key = (row.workspace, row.session, row.entry)
        if row.decision != "skip":
            self._folded.pop(key, None)
            return True
        sig = f"{row.reason}|{row.error or ''}"
        if row.trigger == "scheduled" and self._folded.get(key) == sig:
            return False
        self._folded[key] = sig
        return True

    async def _tell_problems(self, inputs: list[WorkspaceInput]) -> None:
        for p in self.problems(inputs):
            where = f"{p['file']}:{p['line']}" if p["line"] else p["file"]
            logger.bind(workspace=p["workspace"]).error(
                "HEARTBEAT.md problem at {}: {}", where, p["error"]
            )
            await self._notify(
                p["workspace"],
                "entry-error",
                f"HEARTBEAT.md problem in workspace {p['workspace']} ({where}): {p['error']}. "
                "The other entries still run; fix this one and it runs too.",
            )

    async def _notify(self, workspace: str, kind: str, text: str) -> None:
        """Tell the owner once per distinct (workspace, text)."""
        first = await asyncio.to_thread(self.state.first_notice, workspace, kind, text, self.now())
        if not first:
            return
        try:
            delivery = self.rt.delivery
            await delivery.deliver(
                text,
                "owner",
                sessions=[],
                dedupe_key=f"notice:{workspace}:{uuid.uuid4().hex[:8]}",
                source=f"heartbeat:{workspace}",
            )
        except Exception:
            logger.bind(workspace=workspace).exception("could not tell the owner: {}", text)

    # ------------------------------------------------------------ the loop

    def _next_cycle_at(self) -> datetime:
        g = self.state.workspace(GLOBAL)
        interval = timedelta(seconds=self.cfg.interval_seconds)
        if g.last_cycle_at is None:
            return self.now()
        return g.last_cycle_at + interval

    def _mark_cycle(self, at: datetime) -> None:
        self.state.mark_cycle(GLOBAL, at)

    async def run_forever(self, stop: asyncio.Event | None = None) -> None:
        """Tick at ``interval_seconds`` from the persisted last cycle (at most one catch-up)."""
        stop = stop or asyncio.Event()
        logger.info("heartbeat loop started")
        try:
            await self._loop(stop)
        finally:
            self.scanner.close()
        logger.info("heartbeat loop stopped")

    async def _loop(self, stop: asyncio.Event) -> None:
        if not await asyncio.to_thread(self.scanner.watch):
            logger.info("heartbeat: no file system events, polling for changes each cycle")
        while not stop.is_set() and not self._stopping:
            try:  # the database may be away (PostgreSQL restart, network): wait, never die
                due = await asyncio.to_thread(self._next_cycle_at)
                now = self.now()
                if now >= due:
                    await asyncio.to_thread(self._mark_cycle, now)
                self._store_back()
            except (StoreError, SQLAlchemyError) as exc:
                await self._store_away(exc, stop)
                continue
            if now >= due:
                try:
                    await self.run_cycle("scheduled", wait=False)
                except Exception:
                    logger.exception("heartbeat cycle failed")
                continue
            self._wake.clear()
            wait_s = min((due - now).total_seconds(), 60.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=wait_s)

    async def _store_away(self, exc: Exception, stop: asyncio.Event) -> None:
        """The state database is unreachable: say so once, retry every STORE_RETRY_S."""
        if self.store_down_since is None:
            self.store_down_since = self.now()
            logger.warning("heartbeat: state database unreachable, waiting for it: {}", exc)
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=STORE_RETRY_S)

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
        ws = self.state.workspace(workspace)
        ws.paused, ws.paused_reason, ws.paused_at = True, reason, self.now()
        self.state.save_workspace(ws)
        self.state.bump_generation(GLOBAL)  # a running gateway re-reads workspace rows

    def resume(self, workspace: str) -> None:
        ws = self.state.workspace(workspace)
        ws.paused, ws.paused_reason, ws.paused_at = False, None, None
        if budget_exceeded(self.cfg, ws, self.now().astimezone(self.tz()).date().isoformat()):
            ws.budget_day = None  # resume lifts today's budget stop
            ws.tokens_today, ws.cost_today = 0, 0.0
        self.state.save_workspace(ws)
        self.state.bump_generation(GLOBAL)
        self.state.clear_notice(workspace, "budget", budget_text(workspace))

    def heartbeat_session_key(self, workspace: str) -> SessionKey:
        return SessionKey("heartbeat", "hb", workspace)
