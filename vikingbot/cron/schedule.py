"""When a cron job runs: validation and due maths, as pure functions.

Three kinds of job:

- ``at``: one shot at an ISO-8601 time (a time without offset is read in the
  job's timezone);
- ``every``: an interval (``90s``, ``30m``, ``2h``, ``1d``) on a grid anchored
  at the job's creation time, so the first run is one interval after ``add``
  and restarts never shift the cadence;
- ``cron``: a 5-field cron expression read in the job's IANA timezone (DST
  handled the way Debian cron does: a time skipped by the spring change runs
  right after it, a time repeated in autumn runs once).

:func:`next_run` is "the first run strictly after ``after``". The service
stores that as ``next_run_at`` and, after a run, asks again from the time the
run finished: however long the bot was down, a job runs at most once to catch
up and then returns to its schedule.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vikingbot.cron.types import KINDS, CronJob
from vikingbot.errors import CronError
from vikingbot.grammar import cron_problem, normal_cron, to_seconds

MIN_INTERVAL_S = 60.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_US = timedelta(microseconds=1)

Due = Literal["run", "wait", "schedule", "idle", "invalid"]


def check_name(name: str) -> str:
    """A job name: letters, digits, ``.``, ``_``, ``-``; starts with a letter or digit."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise CronError(
            f"bad cron job name {name!r}: use 1-100 letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit), e.g. daily-digest"
        )
    return name


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; :class:`CronError` when there is no such zone."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        raise CronError(f"unknown IANA timezone {name!r} (e.g. Europe/Berlin, UTC)") from exc


def parse_at(expr: str, timezone: str = "UTC") -> datetime:
    """An ``at`` time as an aware UTC datetime (no offset: read in ``timezone``)."""
    tz = zone(timezone)
    try:
        when = datetime.fromisoformat(expr.strip())
    except (ValueError, AttributeError) as exc:
        raise CronError(
            f"bad 'at' time {expr!r}: expected ISO-8601 like 2026-03-01T09:00 "
            "or 2026-03-01T09:00+01:00"
        ) from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=tz)
    return when.astimezone(UTC)


def parse_every(expr: str) -> timedelta:
    """An ``every`` interval; at least one minute."""
    try:
        if not isinstance(expr, str):
            raise ValueError(f"expected a duration like 90s, 30m, 2h or 1d, got {expr!r}")
        seconds = to_seconds(expr)
    except ValueError as exc:
        raise CronError(f"bad 'every' interval {expr!r}: {exc}") from exc
    if seconds < MIN_INTERVAL_S:
        raise CronError(
            f"'every' interval {expr!r} is shorter than {MIN_INTERVAL_S:g}s; "
            "cron checks for due jobs about every 15-30 seconds"
        )
    return timedelta(seconds=seconds)


def check_cron(expr: str) -> str:
    """A 5-field cron expression (the one grammar, ``vikingbot.grammar``), single-spaced."""
    reason = cron_problem(expr) if isinstance(expr, str) else "is not text"
    if reason:
        raise CronError(f"bad cron expression {expr!r}: {reason}")
    return normal_cron(expr)


def validate(kind: str, expr: str, timezone: str = "UTC") -> str:
    """Check a job's schedule; return ``expr`` normalised or raise :class:`CronError`."""
    if kind not in KINDS:
        raise CronError(f"unknown cron job kind {kind!r} (expected one of: {', '.join(KINDS)})")
    zone(timezone)
    if kind == "at":
        parse_at(expr, timezone)
        return expr.strip()
    if kind == "every":
        parse_every(expr)
        return expr.strip()
    return check_cron(expr)


def problem(job: CronJob) -> str | None:
    """Why a stored job cannot run (``None`` when it can)."""
    try:
        validate(job.kind, job.expr, job.timezone)
    except CronError as exc:
        return str(exc)
    if not job.prompt or not job.prompt.strip():
        return "the job has an empty prompt"
    return None


def _aware(when: datetime) -> datetime:
    if when.tzinfo is None:
        raise ValueError(f"cron times must be timezone-aware, got {when!r}")
    return when.astimezone(UTC)


def next_run(job: CronJob, after: datetime) -> datetime | None:
    """The job's first run strictly after ``after`` (UTC), or ``None`` if there is none.

    Raises :class:`CronError` for a job whose schedule is invalid.
    """
    after = _aware(after)
    if job.kind == "at":
        when = parse_at(job.expr, job.timezone)
        return when if when > after else None
    if job.kind == "every":
        step = parse_every(job.expr)
        anchor = _aware(job.created_at)
        if after < anchor + step:
            return anchor + step
        steps = (after - anchor) // _US // (step // _US)
        return anchor + step * (steps + 1)
    if job.kind == "cron":
        from cronsim import CronSim

        expr = check_cron(job.expr)
        it = CronSim(expr, after.astimezone(zone(job.timezone)))
        try:
            return next(it).astimezone(UTC)
        except StopIteration:
            return None
    raise CronError(f"unknown cron job kind {job.kind!r} (expected one of: {', '.join(KINDS)})")


def decide(job: CronJob, now: datetime) -> Due:
    """What a tick does with one job.

    ``invalid``: report, never run. ``idle``: disabled or nothing left to run.
    ``schedule``: enabled but no ``next_run_at`` stored yet (compute it, do not
    run). ``run``: due. ``wait``: not yet.
    """
    if problem(job) is not None:
        return "invalid"
    if not job.enabled:
        return "idle"
    if job.next_run_at is None:
        return "schedule" if next_run(job, now) is not None else "idle"
    return "run" if _aware(job.next_run_at) <= _aware(now) else "wait"


def describe(job: CronJob) -> str:
    """The schedule in a few words: ``every 30m``, ``cron 0 9 * * * (Europe/Berlin)``."""
    if job.kind == "cron":
        return f"cron {job.expr} ({job.timezone})"
    if job.kind == "at":
        return f"at {job.expr}"
    return f"{job.kind} {job.expr}"
