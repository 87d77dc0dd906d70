"""Cron due maths on fixed datetimes: each kind, timezones, DST, validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vikingbot.cron.schedule import check_name, decide, describe, next_run, problem, validate
from vikingbot.cron.types import CronJob
from vikingbot.errors import CronError

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def job(kind: str, expr: str, tz: str = "UTC", **kw: object) -> CronJob:
    return CronJob(name="j", kind=kind, expr=expr, prompt="p", created_at=T0, timezone=tz, **kw)  # type: ignore[arg-type]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (T0, T0 + timedelta(minutes=30)),  # first run one interval after add
        (T0 + timedelta(minutes=29), T0 + timedelta(minutes=30)),
        (T0 + timedelta(minutes=30), T0 + timedelta(minutes=60)),  # strictly after
        (T0 + timedelta(minutes=31), T0 + timedelta(minutes=60)),
        (T0 + timedelta(days=3, minutes=1), T0 + timedelta(days=3, minutes=30)),  # grid kept
        (T0 - timedelta(days=1), T0 + timedelta(minutes=30)),
    ],
)
def test_every_runs_on_a_grid_anchored_at_creation(after: datetime, expected: datetime) -> None:
    assert next_run(job("every", "30m"), after) == expected


def test_at_naive_time_is_read_in_the_job_timezone() -> None:
    j = job("at", "2026-07-01T09:00", "Europe/Berlin")
    assert next_run(j, T0) == utc(2026, 7, 1, 7, 0)  # CEST is UTC+2
    assert next_run(j, utc(2026, 7, 1, 7, 0)) is None  # one shot: nothing after it


def test_at_with_offset_ignores_the_job_timezone() -> None:
    j = job("at", "2026-07-01T09:00+05:30", "Europe/Berlin")
    assert next_run(j, T0) == utc(2026, 7, 1, 3, 30)


@pytest.mark.parametrize(
    ("expr", "tz", "after", "expected"),
    [
        ("0 9 * * *", "UTC", utc(2026, 1, 5, 8, 59), utc(2026, 1, 5, 9, 0)),
        ("0 9 * * *", "UTC", utc(2026, 1, 5, 9, 0), utc(2026, 1, 6, 9, 0)),
        # Berlin in winter is UTC+1, in summer UTC+2: same wall-clock time
        ("0 9 * * *", "Europe/Berlin", utc(2026, 1, 5, 0, 0), utc(2026, 1, 5, 8, 0)),
        ("0 9 * * *", "Europe/Berlin", utc(2026, 7, 5, 0, 0), utc(2026, 7, 5, 7, 0)),
        ("0 9 * * 1-5", "America/New_York", utc(2026, 1, 9, 15, 0), utc(2026, 1, 12, 14, 0)),
        # spring forward (Berlin 2026-03-29 02:00 -> 03:00): 02:30 runs at 03:00 CEST
        ("30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 1, 0)),
        # fall back (2026-10-25 03:00 -> 02:00): 02:30 happens twice, runs once
        ("30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 12, 0), utc(2026, 10, 25, 0, 30)),
        ("30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)),
    ],
)
def test_cron_in_a_timezone(expr: str, tz: str, after: datetime, expected: datetime) -> None:
    assert next_run(job("cron", expr, tz), after) == expected


def test_cron_every_half_hour_runs_both_repeated_half_hours_in_autumn() -> None:
    j = job("cron", "*/30 * * * *", "Europe/Berlin")
    runs, t = [], utc(2026, 10, 24, 23, 45)
    for _ in range(5):
        t = next_run(j, t)  # type: ignore[assignment]
        runs.append(t)
    assert [r.strftime("%H:%M") for r in runs] == ["00:00", "00:30", "01:00", "01:30", "02:00"]


@pytest.mark.parametrize(
    ("kind", "expr", "tz", "message"),
    [
        ("cron", "0 9 * *", "UTC", "needs 5 fields"),
        ("cron", "0 25 * * *", "UTC", "bad cron expression"),
        ("cron", "0 9 * * *", "Mars/Olympus", "unknown IANA timezone"),
        ("every", "soon", "UTC", "bad 'every' interval"),
        ("every", "10s", "UTC", "shorter than 60s"),
        ("at", "next tuesday", "UTC", "bad 'at' time"),
        ("weekly", "x", "UTC", "unknown cron job kind"),
    ],
)
def test_invalid_schedules_are_refused_with_a_reason(
    kind: str, expr: str, tz: str, message: str
) -> None:
    with pytest.raises(CronError, match=message):
        validate(kind, expr, tz)


def test_cron_expression_is_normalised() -> None:
    assert validate("cron", "  0   9 * *  1-5 ") == "0 9 * * 1-5"


@pytest.mark.parametrize("name", ["", "has space", "-dash-first", "a/b", "x" * 101, "ünï"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(CronError, match="bad cron job name"):
        check_name(name)


def test_decide() -> None:
    now = T0 + timedelta(hours=1)
    assert decide(job("every", "30m", next_run_at=now), now) == "run"
    assert decide(job("every", "30m", next_run_at=now + timedelta(seconds=1)), now) == "wait"
    assert decide(job("every", "30m", next_run_at=None), now) == "schedule"
    assert decide(job("every", "30m", enabled=False, next_run_at=now), now) == "idle"
    assert decide(job("cron", "61 * * * *", next_run_at=now), now) == "invalid"
    assert decide(job("at", "2026-01-01T00:00", next_run_at=None), now) == "idle"  # passed


def test_problem_and_describe() -> None:
    assert problem(job("cron", "0 9 * * *", "Europe/Berlin")) is None
    assert "unknown IANA timezone" in (problem(job("cron", "0 9 * * *", "Nowhere/City")) or "")
    assert describe(job("cron", "0 9 * * *", "Europe/Berlin")) == "cron 0 9 * * * (Europe/Berlin)"
    assert describe(job("every", "2h")) == "every 2h"
