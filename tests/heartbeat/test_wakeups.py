"""When the heartbeat looks again (wakeups.py), and the planner's part of "on time":
fixed datetimes, no I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from vikingbot.config.schema import HeartbeatConfig
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.planner import WorkspaceInput, plan_workspace
from vikingbot.heartbeat.state import EntryState, WorkspaceState
from vikingbot.heartbeat.types import Decision
from vikingbot.heartbeat.wakeups import MAX_SETTLE_S, SETTLE_S, Wakeups, due_times
from vikingbot.session.types import SessionKey, SessionMeta

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
UTCZ = ZoneInfo("UTC")
HEAD = "# Heartbeat Tasks\n\n## Active Tasks\n\n"
FILE = (
    HEAD + "- every: 1m title: Minute task: Tick\n"
    "- every: 7m title: Seven task: Look\n"
    "- daily: 12:02 title: Brief task: Summarise\n"
    "- cron: '*/5 * * * *' title: Five task: Poll\n"
    "- Check the build\n"
)


def meta() -> SessionMeta:
    return SessionMeta(
        key=SessionKey("telegram", "default", "1"),
        created_at=NOW - timedelta(days=10),
        updated_at=NOW,
        last_user_at=NOW - timedelta(hours=1),
    )


def plan(now: datetime, entries: dict[str, EntryState], *, trigger="scheduled", entry=None):
    ws = WorkspaceInput(
        "shared",
        [meta()],
        parse_heartbeat(FILE),
        WorkspaceState("shared", last_checklist_at=NOW - timedelta(minutes=1)),
        entries=entries,
        shared=True,
    )
    return plan_workspace(
        ws,
        cfg=HeartbeatConfig(),
        now=now,
        tz=UTCZ,
        trigger=trigger,
        today=now.date().isoformat(),
        entry=entry,
    )


def seen(**fired: datetime | None) -> dict[str, EntryState]:
    """Every entry of FILE seen a day ago; ``fired``: last_fired by title."""
    titles = ("Minute", "Seven", "Brief", "Five", "Check the build")
    return {
        t: EntryState("shared", t, NOW - timedelta(days=1), last_fired=fired.get(t)) for t in titles
    }


def by_entry(ds: list[Decision]) -> dict[str, tuple[str, str]]:
    return {(d.entry or "checklist"): (d.decision, d.reason) for d in ds}


S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("last", "now", "expected"),
    [
        (NOW - 60 * S, NOW - S, ("skip", "not-due")),  # a second early: never runs early
        (NOW - 60 * S, NOW - 3 * S, ("skip", "not-due")),  # (the old 5% slack ran this)
        (NOW - 60 * S, NOW, ("run", "due")),
        (NOW - 60 * S, NOW + 2 * S, ("run", "due")),
    ],
)
def test_every_never_runs_before_its_due_time(last, now, expected) -> None:
    assert by_entry(plan(now, seen(Minute=last)))["Minute"] == expected


@pytest.mark.parametrize(
    ("late", "slot_after_due"),
    [
        (timedelta(0), timedelta(0)),  # on time: fired at its due time
        (2 * S, timedelta(0)),  # two seconds late: still counts as its due time
        (59 * S, timedelta(0)),
        (timedelta(hours=3), timedelta(hours=3)),  # after sleep: one run, counted now
    ],
)
def test_every_keeps_its_own_cadence(late, slot_after_due) -> None:
    due = NOW
    ds = plan(due + late, seen(Minute=due - 60 * S))
    run = next(d for d in ds if d.entry == "Minute")
    assert run.unit is not None and run.unit.slot == due + slot_after_due


def test_due_times_is_the_earliest_unit_of_each_workspace() -> None:
    # 12:00:30: Minute fired 12:00:00 (next 12:01), Seven fired 11:55 (next 12:02), Brief
    # at 12:02, Five fired 12:00 (next 12:05); the checklist ran a minute ago (12:09)
    ds = plan(
        NOW + 30 * S,
        seen(Minute=NOW, Seven=NOW - timedelta(minutes=5), Five=NOW),
    )
    assert due_times(ds, UTCZ) == {"shared": NOW + 60 * S}
    # a run of a slot: next due one step after that slot
    ds = plan(NOW + 61 * S, seen(Minute=NOW, Seven=NOW, Five=NOW))
    assert by_entry(ds)["Minute"] == ("run", "due")
    assert due_times(ds, UTCZ) == {"shared": NOW + 120 * S}


def test_due_times_of_decisions_without_a_time() -> None:
    quiet = [Decision("a", "skip", "stale"), Decision("b", "run", "due")]
    assert due_times(quiet, UTCZ) == {"a": None, "b": None}
    assert due_times([], UTCZ) == {}


def test_a_burst_of_saves_is_one_look() -> None:
    w = Wakeups()
    assert not w.take_saved(NOW)
    w.saved(NOW)
    w.saved(NOW + 0.5 * S)  # the editor writes again
    assert w.settled_at() == NOW + (0.5 + SETTLE_S) * S
    assert w.next_at(NOW + timedelta(minutes=10)) == w.settled_at()
    assert not w.take_saved(NOW + S)
    assert w.take_saved(NOW + 2 * S)
    assert not w.take_saved(NOW + 3 * S)  # once
    # writes that never stop are looked at after MAX_SETTLE_S
    for i in range(20):
        w.saved(NOW + i * 0.5 * S)
    assert w.settled_at() == NOW + MAX_SETTLE_S * S


def test_the_queue_wakes_for_the_earliest_due_workspace() -> None:
    w = Wakeups()
    w.learn(
        [
            Decision("a", "skip", "not-due", entry="x", next_due=NOW + 90 * S),
            Decision("a", "skip", "not-due", entry="y", next_due=NOW + 30 * S),
            Decision("b", "skip", "not-due", entry="z", next_due=NOW + 60 * S),
        ],
        UTCZ,
    )
    cycle = NOW + timedelta(minutes=10)
    assert w.next_at(cycle) == NOW + 30 * S
    assert w.take_due(NOW + 29 * S) == set()
    assert w.take_due(NOW + 30 * S) == {"a"}
    assert w.next_at(cycle) == NOW + 60 * S
    # planned again: b has nothing timed any more (entry removed): no wake for it
    w.learn([Decision("b", "skip", "stale")], UTCZ)
    assert w.next_at(cycle) == cycle


def test_a_workspace_busy_at_its_due_time_is_looked_at_when_it_finishes() -> None:
    w = Wakeups()
    assert not w.finished("a", NOW)
    w.learn([Decision("a", "skip", "busy")], UTCZ)
    assert w.finished("a", NOW + 5 * S)
    assert w.take_due(NOW + 5 * S) == {"a"}
    assert not w.finished("a", NOW + 6 * S)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Brief", ("run", "manual")),  # scheduled, not due: runs now
        ("brief", ("run", "manual")),  # a title in any case
        ("Minute", ("run", "manual")),
        ("Check the build", ("run", "manual")),  # unscheduled: the checklist runs
        ("Nope", ("skip", "invalid")),
    ],
)
def test_run_now_entry_runs_that_entry_only(name, expected) -> None:
    ds = plan(
        NOW + 5 * S, seen(Minute=NOW, Brief=NOW - timedelta(hours=1)), trigger="manual", entry=name
    )
    assert [(d.decision, d.reason) for d in ds] == [expected]
    d = ds[0]
    if name in ("Brief", "brief", "Minute"):
        assert (
            d.entry == name.title() and d.unit is not None and d.unit.slot is None
        )  # no slot used
    if name == "Check the build":
        assert d.unit is not None and d.unit.kind == "checklist"
    if name == "Nope":
        assert d.detail is not None and "Brief" in d.detail  # lists what there is
