"""The cron runner: finds due jobs on each tick and runs each as an unattended turn.

A run happens in its own session ``cron:default:<job name>`` (created with
``skip_heartbeat``), is bounded by the job's timeout (default
``bot.heartbeat.task_timeout_s``), runs under the safe-tools policy (the agent
loop applies it to every turn marked ``unattended``), and its reply is handed
to delivery unless it is a no-op (``HEARTBEAT_OK``). Before a run starts the
job is claimed: ``next_run_at`` moves to the next run after *now*, so a bot
that was down for days runs each job once, not once per missed slot.

Several gateways may share the database (docs/scaling.md): a firing is claimed
as the lease ``cron:<job>:<due slot>`` (``vikingbot.store.leases``) before the
job is moved past it, so of gateways that saw the same due slot exactly one runs
it. The lease lasts the run's timeout and is marked done at the end; a gateway
that died between claiming and moving the job on loses the lease when it runs
out, and another gateway fires the slot then.

A job that cannot run (bad expression or timezone in the database) is marked
``invalid``, logged, audited and reported to the owner once; it is never
dropped silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot import telemetry
from vikingbot.clock import Clock, SystemClock, nap
from vikingbot.cron import schedule
from vikingbot.cron.jobs import CronJobs
from vikingbot.cron.notices import LEGACY_SCOPE, invalid_key, scope
from vikingbot.cron.types import CronJob, CronRun
from vikingbot.delivery.adapter import TurnDelivery
from vikingbot.errors import CronError, VikingbotError
from vikingbot.heartbeat.notices import Notifier
from vikingbot.replies import is_noop, strip_tokens
from vikingbot.session.types import SessionKey
from vikingbot.store.leases import Claim, Leases

if TYPE_CHECKING:
    from vikingbot.agent.types import TurnResult, TurnRunner
    from vikingbot.config.schema import Config
    from vikingbot.store.db import StateStore
    from vikingbot.store.leases import Claim

DEFAULT_POLL_S = 20.0
TIMEOUT_GRACE_S = 5.0


def session_key(job_name: str) -> SessionKey:
    """The session a job's turns run in."""
    return SessionKey("cron", "default", job_name)


def cron_prompt(job: CronJob) -> str:
    """The text the agent gets: a short header, then the user's prompt verbatim."""
    return (
        f"[Scheduled job '{job.name}', {schedule.describe(job)}. Nobody is watching this turn; "
        "your final reply is delivered to the user. If there is nothing worth reporting, "
        "reply with just: HEARTBEAT_OK]\n\n"
        f"{job.prompt}"
    )


class CronService:
    """Runs cron jobs. ``tick()`` for one pass; ``run_forever()`` in the gateway."""

    def __init__(
        self,
        config: Config,
        *,
        store: StateStore,
        agent: TurnRunner,
        delivery: Any,
        sessions: Any,
        workspaces: Any,
        clock: Clock | None = None,
        poll_s: float = DEFAULT_POLL_S,
        owner: str | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.agent = agent
        self.delivery = delivery
        self.sessions = sessions
        self.workspaces = workspaces
        self.clock: Clock = clock or SystemClock()
        self.poll_s = poll_s
        self.jobs = CronJobs(store, self.clock)
        self.owner = owner or f"cron:{uuid.uuid4().hex[:12]}"  # this gateway, in leases
        # Counters for /metrics: runs_total, runs_<outcome>_total, invalid_reports_total.
        self.metrics: dict[str, int] = {"runs_total": 0, "invalid_reports_total": 0}
        self._running: dict[str, asyncio.Task[CronRun]] = {}
        self._first_tick = True

    # ---------------------------------------------------------------- public

    async def tick(self) -> list[CronRun]:
        """Start every due job and wait for the runs this tick started."""
        started = await self._start_due()
        if not started:
            return []
        return list(await asyncio.gather(*started))

    async def run_now(self, name: str) -> CronRun:
        """Run one job immediately (its schedule is left as it is)."""
        job = await asyncio.to_thread(self.jobs.require, name)
        reason = schedule.problem(job)
        if reason is not None:
            await self._report_invalid(job, reason)
            raise CronError(f"cron job {name!r} cannot run: {reason}")
        if name in self._running:
            raise CronError(f"cron job {name!r} is already running")
        await asyncio.to_thread(
            self.jobs.update, name, last_outcome="running", last_run_at=self.clock.now()
        )
        task = asyncio.ensure_future(self._run(job, manual=True))
        self._running[name] = task
        try:
            return await task
        finally:
            self._running.pop(name, None)

    async def run_forever(self, stop_event: asyncio.Event) -> None:
        """Tick about every ``poll_s`` seconds until ``stop_event`` is set.

        On stop, running jobs get ``bot.gateway.shutdown_grace_s`` to finish and
        are then cancelled (recorded as ``interrupted``).
        """
        logger.info("cron: started (checking every {}s)", self.poll_s)
        try:
            while not stop_event.is_set():
                try:
                    await self._start_due()
                except Exception:
                    logger.exception("cron: tick failed; will try again")
                # its own tick notices a suspend soon enough: a wait of poll_s started
                # before the lid closed ends within poll_s after it opens
                await nap(stop_event, self.poll_s, self.clock, check_s=self.poll_s)
        finally:
            await self._drain(self.config.bot.gateway.shutdown_grace_s)
            logger.info("cron: stopped")

    @property
    def running(self) -> list[str]:
        return sorted(self._running)

    # ------------------------------------------------------------- planning

    async def _start_due(self) -> list[asyncio.Task[CronRun]]:
        now = self.clock.now()
        jobs = await asyncio.to_thread(self.jobs.list)
        if self._first_tick:
            self._first_tick = False
            jobs = [await self._recover(job) for job in jobs]
        started: list[asyncio.Task[CronRun]] = []
        for job in jobs:
            if job.name in self._running:
                continue
            try:
                task = await self._plan(job, now)
            except VikingbotError as exc:  # e.g. removed a moment ago
                logger.warning("cron: {} skipped this tick: {}", job.name, exc)
                continue
            if task is not None:
                started.append(task)
        return started

    async def _plan(self, job: CronJob, now: datetime) -> asyncio.Task[CronRun] | None:
        """Report, schedule or start one job; the run's task when it started."""
        decision = schedule.decide(job, now)
        if decision == "invalid":
            await self._report_invalid(job, schedule.problem(job) or "invalid")
            return None
        if job.last_outcome == "invalid":  # fixed in the database since
            await self._forget_invalid(job.name, job.last_error or "")  # broken again: news
            job = await asyncio.to_thread(
                self.jobs.update, job.name, last_outcome=None, last_error=None
            )
        if decision == "schedule":
            nxt = schedule.next_run(job, now)
            await asyncio.to_thread(self.jobs.update, job.name, next_run_at=nxt)
            logger.info("cron: {} scheduled for {}", job.name, nxt)
        if decision != "run":
            return None
        lease = await self._claim_slot(job)
        if lease is None:
            return None
        await self._claim(job, now)
        task = asyncio.ensure_future(self._fire(job, lease))
        self._running[job.name] = task
        task.add_done_callback(self._forget_task)
        return task

    def _slot_key(self, job: CronJob) -> str:
        slot = job.next_run_at.isoformat() if job.next_run_at is not None else "now"
        return f"cron:{job.name}:{slot}"

    async def _claim_slot(self, job: CronJob) -> Claim | None:
        """This gateway's claim on the job's due slot; None when another gateway has it."""
        ttl = (job.timeout_s or self.config.bot.heartbeat.task_timeout_s) + 2 * TIMEOUT_GRACE_S
        found = await asyncio.to_thread(
            Leases(self.store, self.clock).claim, self._slot_key(job), self.owner, ttl
        )
        if isinstance(found, Claim):
            return found
        logger.debug("cron: {} slot taken by {}", job.name, found.holder)
        return None

    async def _fire(self, job: CronJob, lease: Claim) -> CronRun:
        try:
            return await self._run(job, manual=False)
        finally:
            with contextlib.suppress(VikingbotError):
                await asyncio.to_thread(Leases(self.store, self.clock).mark_done, lease)

    def _forget_task(self, task: asyncio.Task[CronRun]) -> None:
        for name, running in list(self._running.items()):
            if running is task:
                del self._running[name]

    async def _claim(self, job: CronJob, now: datetime) -> None:
        """Move the job past this run before it starts (the catch-up rule)."""
        nxt = schedule.next_run(job, now)
        late = timedelta(seconds=max(self.poll_s * 3, 60))
        if job.next_run_at is not None and now - job.next_run_at > late:
            logger.info(
                "cron: {} was due at {}; running once now to catch up", job.name, job.next_run_at
            )
        if job.kind == "at":
            await asyncio.to_thread(
                self.jobs.update,
                job.name,
                enabled=False,
                next_run_at=None,
                last_run_at=now,
                last_outcome="running",
            )
        else:
            await asyncio.to_thread(
                self.jobs.update,
                job.name,
                next_run_at=nxt,
                last_run_at=now,
                last_outcome="running",
            )

    async def _recover(self, job: CronJob) -> CronJob:
        """A job left ``running`` by a bot that died mid-run is marked ``interrupted``."""
        if job.last_outcome != "running":
            return job

        live = await asyncio.to_thread(Leases(self.store, self.clock).holders, f"cron:{job.name}:")
        if live:  # another gateway on this database is running it right now
            return job
        logger.warning("cron: {} was interrupted by a shutdown or crash", job.name)
        await self._audit(job.name, "cron.run", "interrupted", "the bot stopped during the run")
        return await asyncio.to_thread(
            self.jobs.update,
            job.name,
            last_outcome="interrupted",
            last_error="the bot stopped during the run",
        )

    def _notices(self, job_name: str) -> Notifier:
        """The owner's notices about one job (``heartbeat.notices``: told once per problem)."""

        async def send(text: str, dedupe_key: str) -> None:
            await self.delivery.deliver(
                text, "owner", sessions=[], dedupe_key=dedupe_key, source=f"cron:{job_name}"
            )

        return Notifier(self.store, send, self.clock)

    async def _forget_invalid(self, job_name: str, reason: str) -> None:
        """The "cannot run" notice for ``reason`` is over (also its pre-scope row)."""
        notifier, key = self._notices(job_name), invalid_key(job_name, reason)
        await notifier.resolve(scope(job_name), key)
        await notifier.resolve(LEGACY_SCOPE, key)

    async def _report_invalid(self, job: CronJob, reason: str) -> None:
        """Mark the job invalid and tell the owner once per job and reason (a new reason
        ends the old one's notice)."""
        if not (job.last_outcome == "invalid" and job.last_error == reason):
            if job.last_outcome == "invalid":
                await self._forget_invalid(job.name, job.last_error or "")
            await asyncio.to_thread(
                self.jobs.update, job.name, last_outcome="invalid", last_error=reason
            )
        text = (
            f"Cron job '{job.name}' cannot run: {reason}. "
            f"Fix it with `vikingbot cron remove {job.name}` and `vikingbot cron add ...`."
        )
        key = invalid_key(job.name, reason)
        if not await self._notices(job.name).tell(scope(job.name), key, text, kind="cron-invalid"):
            return  # told already (or delivery failed: the next tick tries again)
        logger.error("cron: job {} cannot run: {}", job.name, reason)
        self.metrics["invalid_reports_total"] += 1
        await self._audit(job.name, "cron.invalid", "invalid", reason)

    # -------------------------------------------------------------- running

    def _workspace(self, job: CronJob, key: SessionKey) -> Path:
        if not job.workspace:
            return Path(self.workspaces.workspace_for(key))
        for path in self.workspaces.list_workspaces():
            if Path(path).name == job.workspace:
                return Path(path)
        known = ", ".join(Path(p).name for p in self.workspaces.list_workspaces()) or "none"
        raise CronError(f"cron job {job.name!r}: no workspace {job.workspace!r} (known: {known})")

    async def _run(self, job: CronJob, *, manual: bool) -> CronRun:
        """One run of ``job`` (:meth:`_run_job`), traced as ``cron.run`` with the agent's
        turn inside."""
        attrs = {"vikingbot.cron.job": job.name, "vikingbot.cron.manual": manual}
        with telemetry.span("cron.run", attrs) as sp:
            run = await self._run_job(job, manual=manual)
            sp.set("vikingbot.cron.outcome", run.outcome)
            return run

    async def _run_job(self, job: CronJob, *, manual: bool) -> CronRun:
        started_at = self.clock.now()
        t0 = time.monotonic()
        run_id = f"cron:{job.name}:{started_at:%Y%m%dT%H%M%S}:{uuid.uuid4().hex[:8]}"
        key = session_key(job.name)
        timeout = job.timeout_s or self.config.bot.heartbeat.task_timeout_s
        log = logger.bind(cron=job.name, session=str(key))
        reply: str | None = None
        error: str | None = None
        outcome = "error"
        try:
            await asyncio.to_thread(self.sessions.get_or_create, key, True)
            workspace = await asyncio.to_thread(self._workspace, job, key)
            log.info("cron: running {} ({})", job.name, "manual" if manual else "scheduled")
            metadata = {
                "unattended": True,
                "cron": job.name,
                "actor": f"cron:{job.name}",
                "run_id": run_id,
                "workspace": str(workspace),
                "timeout_s": timeout,
            }
            target = job.target or self.config.bot.heartbeat.target
            chats = await asyncio.to_thread(self._chats_of, workspace)
            # the message tool sends through delivery: the agent's targets are checked there
            deliver = TurnDelivery(
                self.delivery,
                target=target,
                run_id=run_id,
                source=f"cron:{job.name}",
                sessions=chats,
            )
            try:
                # the loop ends the turn itself at timeout_s; this is the backstop
                async with asyncio.timeout(timeout + min(TIMEOUT_GRACE_S, timeout / 10)):
                    result: TurnResult = await self.agent.run_turn(
                        cron_prompt(job), key, metadata, deliver=deliver
                    )
            except TimeoutError:
                outcome, error = "timeout", f"the run took longer than {timeout:g}s"
            else:
                reply = result.text
                outcome, error = await self._finish(job, result, run_id, workspace)
            if outcome == "timeout":
                log.warning(
                    "cron: {} timed out after {}s; resetting its session", job.name, timeout
                )
                await asyncio.to_thread(self.sessions.reset, key)
        except asyncio.CancelledError:
            outcome, error = "interrupted", "the bot stopped during the run"
            await asyncio.shield(self._record(job, outcome, error, run_id, manual, t0))
            raise
        except VikingbotError as exc:
            outcome, error = "error", str(exc)
            log.error("cron: {} failed: {}", job.name, exc)
        except Exception as exc:
            outcome, error = "error", f"{type(exc).__name__}: {exc}"
            log.exception("cron: {} failed", job.name)
        await self._record(job, outcome, error, run_id, manual, t0)
        return CronRun(
            job=job.name,
            run_id=run_id,
            started_at=started_at,
            outcome=outcome,
            reply=reply,
            error=error,
            duration_s=time.monotonic() - t0,
            manual=manual,
        )

    async def _finish(
        self, job: CronJob, result: TurnResult, run_id: str, workspace: Path
    ) -> tuple[str, str | None]:
        if result.ended == "timeout":
            return "timeout", result.error or "the agent turn timed out"
        if result.ended == "error" or result.error:
            return "error", result.error or "the agent turn failed"
        ack = self.config.bot.heartbeat.ack_max_chars
        if is_noop(result.text, ack):
            logger.info("cron: {} had nothing to report", job.name)
            return "noop", None
        target = job.target or self.config.bot.heartbeat.target
        text = strip_tokens(result.text or "")
        report = await self._deliver(text, target, run_id, job.name, workspace)
        if report is None:
            return "error", f"delivery to {target!r} failed (see the log)"
        if report.skipped == "silent":
            return "ok", None
        if report.status == "inboxed":
            failed = ", ".join(report.failed)
            why = f"could not send to {failed}" if failed else f"target {target!r} is the inbox"
            return "inboxed", f"{why}; kept in the inbox"
        if report.status == "failed":
            return "error", f"delivery to {target!r} failed (see the log)"
        return "delivered", None

    def _chats_of(self, workspace: Path | None) -> list[Any]:
        """The chat sessions sharing ``workspace`` (what ``last`` and ``all`` choose from)."""
        if workspace is None:
            return []
        chats = []
        for meta in self.sessions.list_sessions():
            if meta.key.type in ("cron", "heartbeat"):
                continue
            try:
                if Path(self.workspaces.path_for(meta.key)) == workspace:
                    chats.append(meta)
            except VikingbotError:
                continue
        return chats

    async def _deliver(
        self,
        text: str,
        target: str,
        dedupe_key: str,
        job_name: str,
        workspace: Path | None = None,
    ) -> Any:
        """Hand a result to delivery; its report, or ``None`` when delivery itself failed."""
        try:
            chats = await asyncio.to_thread(self._chats_of, workspace)
            return await self.delivery.deliver(
                text,
                target,
                sessions=chats,
                dedupe_key=dedupe_key,
                source=f"cron:{job_name}",
            )
        except Exception:
            logger.exception("cron: delivering {} to {} failed", dedupe_key, target)
            return None

    async def _record(
        self, job: CronJob, outcome: str, error: str | None, run_id: str, manual: bool, t0: float
    ) -> None:
        self.metrics["runs_total"] += 1
        name = f"runs_{outcome}_total"
        self.metrics[name] = self.metrics.get(name, 0) + 1
        duration = round(time.monotonic() - t0, 3)
        try:
            await asyncio.to_thread(
                self.jobs.update, job.name, last_outcome=outcome, last_error=error
            )
        except CronError:
            logger.warning("cron: job {} was removed while it ran", job.name)
        await self._audit(
            job.name,
            "cron.run",
            outcome,
            error,
            {"run_id": run_id, "manual": manual, "duration_s": duration},
        )

    async def _audit(
        self,
        name: str,
        action: str,
        outcome: str,
        reason: str | None,
        details: dict[str, Any] | None = None,
    ) -> None:
        try:
            await asyncio.to_thread(
                self.store.audit, f"cron:{name}", action, name, outcome, reason, details
            )
        except Exception:
            logger.exception("cron: could not write audit event {} for {}", action, name)

    async def _drain(self, grace_s: float) -> None:
        tasks = list(self._running.values())
        if not tasks:
            return
        logger.info("cron: waiting up to {}s for {} running job(s)", grace_s, len(tasks))
        try:
            await asyncio.wait(tasks, timeout=grace_s)
        finally:  # also when the gateway cancels us first: never leave a run behind
            pending = [t for t in tasks if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
