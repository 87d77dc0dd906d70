"""When the heartbeat looks again: the *when* of a cycle.

Three parts, each with one job: this module decides *when* a workspace is looked at,
the pure planner (planner.py) decides *whether* each unit runs then, and the unit
runner (runner.py) *runs* the turns. The gateway's loop (service.py) wakes at the
earliest of:

- the **interval cycle**, ``interval_seconds`` after the last one: it looks at every
  workspace and paces the unscheduled checklist;
- a workspace's **due time**: the earliest time one of its units falls due, from the
  decisions of the last cycle that planned it (:func:`due_times`); the loop runs a
  cycle of that workspace alone then, so a scheduled entry runs at its minute,
  whatever the interval;
- a **saved HEARTBEAT.md**: the file watch reports it (index.py), and once the writes
  have settled for :data:`SETTLE_S` (an editor's burst of writes is one look) the loop
  runs a cycle of what changed.

:func:`due_times` is pure (table-tested); :class:`Wakeups` keeps its answers in a
:class:`~vikingbot.heartbeat.duequeue.DueQueue` and the time of the last save.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from vikingbot.heartbeat.duequeue import DueQueue
from vikingbot.heartbeat.schedule import next_due
from vikingbot.heartbeat.types import Decision

SETTLE_S = 1.0
"""A save is looked at once no further write came for this long..."""
MAX_SETTLE_S = 5.0
"""...or this long after the first write of a burst, whichever is first."""


def due_times(decisions: Iterable[Decision], tz: ZoneInfo) -> dict[str, datetime | None]:
    """For each workspace the decisions cover, when it next has a unit due (None: not
    before the next interval cycle).

    A not-due skip says when (``next_due``). A scheduled run that fires a slot is next
    due one schedule step after that slot (the runner stores the slot as fired). Every
    other decision (a checklist run, a quiet skip, a continuation) waits for the
    interval cycle. Pure."""
    out: dict[str, datetime | None] = {}
    for d in decisions:
        at = d.next_due if d.decision == "skip" and d.reason == "not-due" else None
        unit = d.unit
        if d.decision == "run" and unit is not None and unit.slot is not None:
            entry = unit.entry
            if entry is not None and entry.schedule is not None:
                try:
                    at = next_due(entry.schedule, unit.slot, unit.slot, tz)
                except (ValueError, OverflowError):
                    at = None
        old = out.get(d.workspace)
        out[d.workspace] = at if old is None else (old if at is None else min(old, at))
    return out


class Wakeups:
    """The loop's wake-up times: workspaces by due time, and the pending save."""

    def __init__(self) -> None:
        self._queue = DueQueue()
        self._saved: tuple[datetime, datetime] | None = None  # (first, last) write of a burst
        self._blocked: set[str] = set()  # due while its previous cycle was still running

    def learn(self, decisions: list[Decision], tz: ZoneInfo) -> None:
        """Take a cycle's decisions: each workspace they cover waits for its new time."""
        for ws, at in due_times(decisions, tz).items():
            if at is None:
                self._queue.discard(ws)
            else:
                self._queue.put(ws, at)
        self._blocked |= {d.workspace for d in decisions if d.reason == "busy"}

    def finished(self, workspace: str, now: datetime) -> bool:
        """A workspace's cycle ended; if a due time passed meanwhile, it is due now."""
        if workspace not in self._blocked:
            return False
        self._blocked.discard(workspace)
        self._queue.put(workspace, now)
        return True

    def saved(self, now: datetime) -> None:
        """A HEARTBEAT.md was written (the file watch said so)."""
        first = self._saved[0] if self._saved else now
        self._saved = (first, now)

    def settled_at(self) -> datetime | None:
        """When the pending save is looked at (None: no save pending)."""
        if self._saved is None:
            return None
        first, last = self._saved
        return min(last + timedelta(seconds=SETTLE_S), first + timedelta(seconds=MAX_SETTLE_S))

    def take_saved(self, now: datetime) -> bool:
        """Whether a save is to be looked at now (it is then no longer pending)."""
        at = self.settled_at()
        if at is None or now < at:
            return False
        self._saved = None
        return True

    def take_due(self, now: datetime) -> set[str]:
        """The workspaces whose due time has come (removed from the queue)."""
        return self._queue.pop_due(now, inclusive=True)

    def next_at(self, cycle_at: datetime) -> datetime:
        """When the loop wakes next: the interval cycle, a due workspace or a save."""
        times = [cycle_at, self._queue.next_at(), self.settled_at()]
        return min(t for t in times if t is not None)
