"""Due maths for scheduled entries and active hours: pure functions of (spec, state, now).

All datetimes passed in must be timezone-aware; everything returned is in UTC.
Wall-clock rules (``daily:``, ``cron:``, active hours) are applied in the
heartbeat timezone ``tz``, including on the days clocks change:

- a local time that does not exist that day (spring forward) happens at the
  first instant after the gap (``daily: 02:30`` in Europe/Berlin fires at 03:00);
- a local time that happens twice (fall back) counts once, at its first
  occurrence.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from vikingbot.heartbeat.types import Schedule

NEVER = datetime.max.replace(tzinfo=UTC)
"""Returned for a cron expression that has no further occurrence."""


def next_due(
    schedule: Schedule,
    first_seen: datetime,
    last_fired: datetime | None,
    tz: ZoneInfo,
) -> datetime:
    """When an entry is next due (UTC). It may be in the past: then it is due now.

    - ``every``: one interval after the last run, or after ``first_seen`` for a
      new entry (a new entry never fires the moment it is written).
    - ``daily``: the first occurrence of its local time strictly after the last
      run (or after ``first_seen``).
    - ``cron``: the first occurrence of the expression in ``tz`` strictly after
      the last run (or after ``first_seen``).

    The next due time is always computed from the *last* run, never from a list
    of missed ones, so after downtime the entry is due once (one run, never a
    burst of catch-ups); once it has fired, the caller stores the firing time
    as ``last_fired`` and the rhythm continues from there.

    The caller must also store ``last_fired`` when a due entry is *skipped*
    without a model call (checker says no work, signature unchanged, a run
    still pending): a skipped run counts as fired, so the rhythm holds and the
    entry is not re-tried on every tick.

    With a coarse tick the effective period of ``every`` is the interval
    rounded up to the next tick; a scheduler that wakes at the earliest
    ``next_due`` avoids that drift.
    """
    _require_aware(first_seen, "first_seen")
    base = first_seen if last_fired is None else _require_aware(last_fired, "last_fired")
    base = base.astimezone(UTC)
    if schedule.kind == "every":
        if not schedule.every_s or schedule.every_s <= 0:
            raise ValueError(f"every-schedule needs a positive interval, got {schedule.every_s}")
        try:
            return base + timedelta(seconds=schedule.every_s)
        except OverflowError:
            raise ValueError(
                f"every: {schedule.describe().removeprefix('every ')} is too long: the next "
                "due time would be past the year 9999"
            ) from None
    if schedule.kind == "daily":
        if not schedule.daily:
            raise ValueError("daily-schedule needs a time HH:MM")
        return next_daily(base, parse_hhmm(schedule.daily), tz)
    if not schedule.cron:
        raise ValueError("cron-schedule needs an expression")
    return next_cron(schedule.cron, base, tz)


def is_due(
    schedule: Schedule,
    first_seen: datetime,
    last_fired: datetime | None,
    now: datetime,
    tz: ZoneInfo,
) -> bool:
    """True when ``now`` is at or past ``next_due`` (see there for the rules)."""
    _require_aware(now, "now")
    return now.astimezone(UTC) >= next_due(schedule, first_seen, last_fired, tz)


def latest_slot(schedule: Schedule, now: datetime, tz: ZoneInfo) -> datetime:
    """The latest ``daily:``/``cron:`` occurrence at or before ``now`` (UTC).

    What a due clock-time entry fires: stored as its ``last_fired``, the same slot
    is never due again, and after downtime only the latest missed slot counts.
    """
    now = _require_aware(now, "now").astimezone(UTC)
    if schedule.kind == "daily" and schedule.daily:
        at = parse_hhmm(schedule.daily)
        day = now.astimezone(tz).date()
        for back in range(3):
            occurrence = local_occurrence(day - timedelta(days=back), at, tz)
            if occurrence <= now:
                return occurrence
    if schedule.kind == "cron" and schedule.cron:
        return previous_cron(schedule.cron, now, tz)
    raise ValueError(f"{schedule.describe()} has no clock-time slot")


def previous_cron(expr: str, at_or_before: datetime, tz: ZoneInfo) -> datetime:
    """The last occurrence of a cron expression in ``tz`` at or before the given instant."""
    limit = at_or_before.astimezone(UTC)
    try:
        # reverse iteration yields instants strictly before its start: start one second later
        runs = CronSim(expr, (limit + timedelta(seconds=1)).astimezone(tz), reverse=True)
        for _ in range(1000):
            candidate = next(runs).astimezone(UTC)
            if candidate <= limit:
                return candidate
    except StopIteration:
        pass
    except CronSimError as exc:
        raise ValueError(f"cron expression {expr!r} is invalid: {exc}") from exc
    raise ValueError(f"cron expression {expr!r} has no occurrence before {limit:%Y-%m-%d %H:%M}")


def parse_hhmm(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def local_occurrence(day: date, at: time, tz: ZoneInfo) -> datetime:
    """The instant (UTC) the wall clock in ``tz`` first shows ``at`` on ``day``.

    A wall time inside a spring-forward gap gives the first instant after the
    gap; a wall time repeated by a fall-back gives its first occurrence.
    """
    naive = datetime.combine(day, at)
    earlier = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if _wall(earlier, tz) == naive:
        return earlier
    # Not a real local time: search the transition between the two readings.
    other = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    lo, hi = sorted((earlier, other))
    if _wall(hi, tz) < naive:  # defensive; zoneinfo always brackets the gap
        return hi
    step = timedelta(seconds=1)
    while hi - lo > step:
        mid = lo + (hi - lo) / 2
        mid = mid.replace(microsecond=0)
        if mid <= lo:
            mid = lo + step
        if _wall(mid, tz) >= naive:
            hi = mid
        else:
            lo = mid
    return hi


def next_daily(after: datetime, at: time, tz: ZoneInfo) -> datetime:
    """The first occurrence of wall time ``at`` in ``tz`` strictly after ``after`` (UTC)."""
    after = _require_aware(after, "after").astimezone(UTC)
    day = after.astimezone(tz).date() - timedelta(days=1)
    for _ in range(4):
        occurrence = local_occurrence(day, at, tz)
        if occurrence > after:
            return occurrence
        day += timedelta(days=1)
    raise AssertionError("unreachable: a daily time occurs every day")  # pragma: no cover


def next_cron(expr: str, after: datetime, tz: ZoneInfo) -> datetime:
    """The first occurrence of a 5-field cron expression in ``tz`` strictly after ``after``."""
    after = _require_aware(after, "after").astimezone(UTC)
    try:
        runs = CronSim(expr, after.astimezone(tz))
        for _ in range(1000):
            candidate = next(runs).astimezone(UTC)
            # Compare in UTC: a repeated local hour can yield a wall time that
            # is already behind us in real time.
            if candidate > after:
                return candidate
    except StopIteration:
        return NEVER
    except CronSimError as exc:
        raise ValueError(f"cron expression {expr!r} is invalid: {exc}") from exc
    return NEVER  # pragma: no cover


def in_active_hours(now: datetime, start: time, end: time, tz: ZoneInfo) -> bool:
    """True when the wall clock in ``tz`` is in ``[start, end)``.

    Windows may wrap midnight (``22:00``-``06:00``); ``start == end`` means always.
    """
    if start == end:
        return True
    wall = _require_aware(now, "now").astimezone(tz).time().replace(tzinfo=None)
    if start < end:
        return start <= wall < end
    return wall >= start or wall < end


def next_active_start(now: datetime, start: time, end: time, tz: ZoneInfo) -> datetime:
    """``now`` (UTC) when inside active hours, else when the window next opens."""
    if in_active_hours(now, start, end, tz):
        return now.astimezone(UTC)
    return next_daily(now, start, tz)


def _wall(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def _require_aware(value: datetime, name: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")
    return value
