"""The housekeeping service: index, prune and consolidate, on a schedule, off the event loop.

- index: about every ``bot.memory.index_interval_s`` (default 900 s);
- consolidate: on the same cadence, the memory pass (``memory.consolidate``: one model
  call per workspace with new messages, none otherwise);
- prune: once at start, then daily, removing what is older than
  ``bot.memory.history_max_days``.

Each job runs in a worker thread (``asyncio.to_thread``). A failure is logged,
counted in :attr:`HousekeepingService.metrics` and never stops the other jobs,
the next run, or anything else in the gateway.

Several gateways may share the database and home (docs/scaling.md): before a
scheduled run each job is claimed as the lease ``housekeeping:<job>`` for one
interval, so one gateway runs it per interval and the others skip it. The daily
prune also drops leases that ran out more than ``LEASE_KEEP`` ago.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from loguru import logger

from vikingbot.clock import Clock, SystemClock, nap
from vikingbot.errors import VikingbotError
from vikingbot.housekeeping.index import IndexStats, index_sessions
from vikingbot.housekeeping.prune import PruneStats, prune
from vikingbot.memory.consolidate import Complete, ConsolidateStats, consolidate_idle
from vikingbot.store.leases import Claim, Leases

if TYPE_CHECKING:
    from vikingbot.config.schema import Config
    from vikingbot.session.store import SessionStore
    from vikingbot.store.db import StateStore

PRUNE_EVERY = timedelta(days=1)
LEASE_KEEP = timedelta(days=30)  # done slots are remembered this long (see store/leases.py)
MAX_WAIT_S = 60.0
T = TypeVar("T")


class HousekeepingService:
    """Keeps history searchable, bounded, and remembered."""

    def __init__(
        self,
        config: Config,
        *,
        store: StateStore,
        sessions: SessionStore,
        workspaces: Any,
        clock: Clock | None = None,
        sessions_dir: Path | None = None,
        owner: str | None = None,
        complete: Complete | None = None,
    ) -> None:
        self.complete = complete  # the memory pass's model call (None: no pass)
        self.owner = owner or f"housekeeping:{uuid.uuid4().hex[:12]}"  # in leases
        self.config = config
        self.store = store
        self.sessions = sessions
        self.workspaces = workspaces
        self.clock: Clock = clock or SystemClock()
        self.sessions_dir = Path(sessions_dir or sessions.sessions_dir)
        # Counters for /metrics (every key ends in _total).
        self.metrics: dict[str, float] = {
            "index_runs_total": 0,
            "index_failures_total": 0,
            "index_docs_added_total": 0,
            "prune_runs_total": 0,
            "prune_failures_total": 0,
            "prune_rows_deleted_total": 0,
            "prune_lines_removed_total": 0,
            "consolidate_runs_total": 0,
            "consolidate_failures_total": 0,
            "consolidated_sessions_total": 0,
            "memory_pass_model_calls_total": 0,
        }
        # When each job last finished without failing (for status displays).
        self.last_ok: dict[str, datetime] = {}
        self._last: dict[str, datetime] = {}

    # ---------------------------------------------------------------- jobs

    async def index_now(self) -> IndexStats | None:
        """Index new session lines now. ``None`` when the run failed (counted)."""
        stats = await self._guard("index", index_sessions, self.store, self.sessions_dir)
        if stats is not None:
            self.metrics["index_docs_added_total"] += stats.docs_added
            if stats.errors:
                self.metrics["index_failures_total"] += 1
        return stats

    async def prune_now(self) -> PruneStats | None:
        """Prune everything older than ``history_max_days`` now (then re-index what changed)."""
        days = self.config.bot.memory.history_max_days
        cutoff = self.clock.now() - timedelta(days=days)
        partial = PruneStats()
        stats = await self._guard("prune", prune, self.store, self.sessions, cutoff, partial)
        self.metrics["prune_rows_deleted_total"] += sum(partial.rows.values())
        self.metrics["prune_lines_removed_total"] += partial.lines_removed
        if stats is not None and stats.errors:
            self.metrics["prune_failures_total"] += 1
        if partial.sessions_pruned:
            await self.index_now()
        return stats

    async def consolidate_now(self) -> ConsolidateStats | None:
        """The memory pass over idle sessions now (``memory.consolidate``)."""
        memory = self.config.bot.memory
        self.metrics["consolidate_runs_total"] += 1
        self._last["consolidate"] = self.clock.now()

        async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
            return await asyncio.to_thread(fn, *args, **kwargs)

        try:
            stats = await consolidate_idle(
                self.sessions,
                self.workspaces.workspace_for,
                self.complete,
                now=self.clock.now(),
                idle_after=timedelta(seconds=memory.consolidate_after_idle),
                cap=memory.max_chars,
                run=run,
            )
        except Exception:
            self.metrics["consolidate_failures_total"] += 1
            logger.exception("housekeeping: consolidate failed; will try again next time")
            return None
        self.last_ok["consolidate"] = self.clock.now()
        self.metrics["consolidated_sessions_total"] += len(stats.consolidated)
        self.metrics["memory_pass_model_calls_total"] += stats.model_calls
        if stats.errors:
            self.metrics["consolidate_failures_total"] += 1
        return stats

    async def _guard(self, job: str, fn: Callable[..., T], *args: Any) -> T | None:
        self.metrics[f"{job}_runs_total"] += 1
        self._last[job] = self.clock.now()
        try:
            result = await asyncio.to_thread(fn, *args)
        except Exception:
            self.metrics[f"{job}_failures_total"] += 1
            logger.exception("housekeeping: {} failed; will try again next time", job)
            return None
        self.last_ok[job] = self.clock.now()
        return result

    # ------------------------------------------------------------- schedule

    def _intervals(self) -> dict[str, timedelta]:
        every = timedelta(seconds=self.config.bot.memory.index_interval_s)
        return {"index": every, "consolidate": every, "prune": PRUNE_EVERY}

    def due(self, now: datetime) -> list[str]:
        """Jobs whose time has come (never run counts as due), in run order."""
        return [
            job
            for job, every in self._intervals().items()
            if job not in self._last or now - self._last[job] >= every
        ]

    def _seconds_to_next(self, now: datetime) -> float:
        waits = [
            (self._last[job] + every - now).total_seconds()
            for job, every in self._intervals().items()
            if job in self._last
        ]
        return min([MAX_WAIT_S, *waits]) if waits else 0.0

    async def _claim(self, job: str) -> bool:
        """Whether this gateway runs ``job`` this interval (another may have it)."""
        leases = Leases(self.store, self.clock)
        every = self._intervals()[job].total_seconds()
        try:
            found = await asyncio.to_thread(leases.claim, f"housekeeping:{job}", self.owner, every)
            if job == "prune" and isinstance(found, Claim):
                await asyncio.to_thread(leases.prune, LEASE_KEEP.total_seconds())
        except VikingbotError as exc:
            logger.warning("housekeeping: cannot claim {}: {}", job, exc)
            found = None
        if isinstance(found, Claim):
            return True
        self._last[job] = self.clock.now()  # done elsewhere (or the database is away)
        return False

    async def run_forever(self, stop_event: asyncio.Event) -> None:
        """Run each job when due until ``stop_event`` is set."""
        runners = {
            "index": self.index_now,
            "consolidate": self.consolidate_now,
            "prune": self.prune_now,
        }
        logger.info(
            "housekeeping: started (index every {}s, prune daily, keep {} days)",
            self.config.bot.memory.index_interval_s,
            self.config.bot.memory.history_max_days,
        )
        while not stop_event.is_set():
            for job in self.due(self.clock.now()):
                if stop_event.is_set():
                    break
                if await self._claim(job):
                    await runners[job]()
            wait = max(1.0, self._seconds_to_next(self.clock.now()))
            # at most MAX_WAIT_S: a suspend is noticed within a minute of waking, soon
            # enough for an index and a prune, and the wait needs no slices of its own
            await nap(stop_event, wait, self.clock, check_s=MAX_WAIT_S)
        logger.info("housekeeping: stopped")
