"""Due maths on fixed datetimes and a settable clock: every, daily (DST too), cron, downtime."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from vikingbot.clock import FakeClock
from vikingbot.errors import ConfigError
from vikingbot.heartbeat.schedule import (
    in_active_hours,
    is_due,
    local_occurrence,
    next_active_start,
    next_due,
)
from vikingbot.heartbeat.timezone import local_zone_name, resolve_timezone
from vikingbot.heartbeat.types import Schedule

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
EVERY_HOUR = Schedule("every", every_s=3600)
DAILY_9 = Schedule("daily", daily="09:00")


def berlin(*args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=BERLIN, fold=fold)  # type: ignore[arg-type,misc]


def run_ticks(
    schedule: Schedule,
    first_seen: datetime,
    last_fired: datetime | None,
    clock: FakeClock,
    until: datetime,
    tick: timedelta = timedelta(minutes=10),
    tz: ZoneInfo = BERLIN,
) -> list[datetime]:
    """Drive the due maths like a heartbeat would: tick, fire when due, store last_fired."""
    fired = []
    while clock.now() <= until:
        now = clock.now()
        if is_due(schedule, first_seen, last_fired, now, tz):
            fired.append(now)
            last_fired = now
        clock.set(now + tick)
    return fired


# --- every ------------------------------------------------------------------


def test_new_entry_fires_one_interval_after_first_seen() -> None:
    seen = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    assert next_due(EVERY_HOUR, seen, None, BERLIN) == seen + timedelta(hours=1)
    assert not is_due(EVERY_HOUR, seen, None, seen, BERLIN)
    assert not is_due(EVERY_HOUR, seen, None, seen + timedelta(minutes=59, seconds=59), BERLIN)
    assert is_due(EVERY_HOUR, seen, None, seen + timedelta(hours=1), BERLIN)


def test_every_counts_from_the_last_run() -> None:
    seen = datetime(2026, 1, 1, tzinfo=UTC)
    fired = datetime(2026, 1, 5, 10, 7, tzinfo=UTC)
    assert next_due(EVERY_HOUR, seen, fired, BERLIN) == datetime(2026, 1, 5, 11, 7, tzinfo=UTC)


def test_every_is_real_time_across_a_dst_change() -> None:
    fired = berlin(2026, 3, 29, 1, 30)  # 00:30 UTC, half an hour before clocks jump
    due = next_due(EVERY_HOUR, fired, fired, BERLIN)
    assert due == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    assert due.astimezone(BERLIN).hour == 3  # the wall clock skipped 02:xx


def test_every_on_a_settable_clock_keeps_its_rhythm() -> None:
    clock = FakeClock(datetime(2026, 1, 5, 8, 0, tzinfo=UTC))
    seen = clock.now()
    fired = run_ticks(Schedule("every", every_s=1800), seen, None, clock, seen + timedelta(hours=3))
    assert [f.strftime("%H:%M") for f in fired] == [
        "08:30",
        "09:00",
        "09:30",
        "10:00",
        "10:30",
        "11:00",
    ]


def test_downtime_gives_one_run_not_a_burst() -> None:
    last = datetime(2026, 1, 2, 9, 0, tzinfo=UTC)
    back = datetime(2026, 1, 5, 14, 3, tzinfo=UTC)  # three days later
    clock = FakeClock(back)
    fired = run_ticks(EVERY_HOUR, last, last, clock, back + timedelta(minutes=50))
    assert fired == [back]
    assert next_due(EVERY_HOUR, last, back, BERLIN) == back + timedelta(hours=1)


def test_a_skipped_run_counts_as_fired() -> None:
    # The caller stores the skip time (no work / unchanged / pending) as last_fired.
    seen = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
    skipped_at = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    assert not is_due(EVERY_HOUR, seen, skipped_at, skipped_at + timedelta(minutes=10), BERLIN)
    assert is_due(EVERY_HOUR, seen, skipped_at, skipped_at + timedelta(hours=1), BERLIN)


def test_restart_in_the_middle_of_an_interval_neither_starves_nor_doubles() -> None:
    last = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    restart = datetime(2026, 1, 5, 9, 25, tzinfo=UTC)
    clock = FakeClock(restart)
    fired = run_ticks(EVERY_HOUR, last, last, clock, datetime(2026, 1, 5, 11, 30, tzinfo=UTC))
    assert [f.strftime("%H:%M") for f in fired] == ["10:05", "11:05"]


# --- daily ------------------------------------------------------------------


def test_daily_first_fire_is_the_next_time_of_day_after_first_seen() -> None:
    assert next_due(DAILY_9, berlin(2026, 1, 5, 8, 0), None, BERLIN) == berlin(2026, 1, 5, 9, 0)
    assert next_due(DAILY_9, berlin(2026, 1, 5, 10, 0), None, BERLIN) == berlin(2026, 1, 6, 9, 0)


def test_daily_fires_once_a_day_at_or_after_its_time() -> None:
    clock = FakeClock(berlin(2026, 1, 5, 0, 5).astimezone(UTC))
    fired = run_ticks(DAILY_9, clock.now(), None, clock, berlin(2026, 1, 8, 0, 0))
    assert [f.astimezone(BERLIN) for f in fired] == [
        berlin(2026, 1, 5, 9, 5),
        berlin(2026, 1, 6, 9, 5),
        berlin(2026, 1, 7, 9, 5),
    ]


def test_daily_is_in_the_heartbeat_timezone() -> None:
    seen = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)
    assert next_due(DAILY_9, seen, None, NEW_YORK) == datetime(2026, 1, 5, 14, 0, tzinfo=UTC)
    assert next_due(DAILY_9, seen, None, BERLIN) == datetime(2026, 1, 5, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("day", "utc_hour"),
    [
        (date(2026, 3, 28), 8),
        (date(2026, 3, 29), 7),
        (date(2026, 10, 24), 7),
        (date(2026, 10, 25), 8),
    ],
)
def test_daily_keeps_local_time_on_both_sides_of_dst(day: date, utc_hour: int) -> None:
    before = datetime.combine(day - timedelta(days=1), time(12), tzinfo=BERLIN)
    due = next_due(DAILY_9, before, before, BERLIN)
    assert due == datetime.combine(day, time(utc_hour), tzinfo=UTC)
    assert due.astimezone(BERLIN).time() == time(9, 0)


def test_daily_time_missing_on_spring_forward_fires_right_after_the_gap() -> None:
    # 2026-03-29 Europe/Berlin: 02:00 jumps to 03:00, so 02:30 does not exist.
    schedule = Schedule("daily", daily="02:30")
    clock = FakeClock(berlin(2026, 3, 28, 12, 0).astimezone(UTC))
    fired = run_ticks(schedule, clock.now(), None, clock, berlin(2026, 3, 30, 12, 0))
    assert [f.astimezone(BERLIN).strftime("%m-%d %H:%M %Z") for f in fired] == [
        "03-29 03:00 CEST",
        "03-30 02:30 CEST",
    ]
    assert local_occurrence(date(2026, 3, 29), time(2, 30), BERLIN) == datetime(
        2026, 3, 29, 1, 0, tzinfo=UTC
    )


def test_daily_time_repeated_on_fall_back_fires_once() -> None:
    # 2026-10-25 Europe/Berlin: 03:00 goes back to 02:00, so 02:30 happens twice.
    schedule = Schedule("daily", daily="02:30")
    clock = FakeClock(berlin(2026, 10, 24, 12, 0).astimezone(UTC))
    fired = run_ticks(
        schedule, clock.now(), None, clock, berlin(2026, 10, 26, 12, 0), tick=timedelta(minutes=5)
    )
    assert [f.astimezone(BERLIN).strftime("%m-%d %H:%M %Z") for f in fired] == [
        "10-25 02:30 CEST",
        "10-26 02:30 CET",
    ]


def test_daily_started_during_the_repeated_hour_does_not_fire_twice() -> None:
    schedule = Schedule("daily", daily="02:30")
    second_pass = berlin(2026, 10, 25, 2, 10, fold=1)  # 01:10 UTC, after the first 02:30
    due = next_due(schedule, second_pass, second_pass, BERLIN)
    assert due.astimezone(BERLIN) == berlin(2026, 10, 26, 2, 30)


def test_daily_after_downtime_runs_once_then_keeps_its_time() -> None:
    last = berlin(2026, 1, 5, 9, 0)
    back = berlin(2026, 1, 8, 15, 0)  # missed three days
    clock = FakeClock(back.astimezone(UTC))
    fired = run_ticks(DAILY_9, last, last, clock, berlin(2026, 1, 9, 12, 0))
    assert [f.astimezone(BERLIN) for f in fired] == [back, berlin(2026, 1, 9, 9, 0)]


# --- cron -------------------------------------------------------------------


def test_cron_weekdays_skip_the_weekend() -> None:
    schedule = Schedule("cron", cron="0 9 * * 1-5")
    friday = berlin(2026, 1, 9, 9, 0)
    assert next_due(schedule, friday, friday, BERLIN) == berlin(2026, 1, 12, 9, 0)


def test_cron_every_fifteen_minutes() -> None:
    clock = FakeClock(datetime(2026, 1, 5, 10, 0, tzinfo=UTC))
    fired = run_ticks(
        Schedule("cron", cron="*/15 * * * *"),
        clock.now(),
        None,
        clock,
        datetime(2026, 1, 5, 11, 0, tzinfo=UTC),
        tick=timedelta(minutes=5),
    )
    assert [f.strftime("%H:%M") for f in fired] == ["10:15", "10:30", "10:45", "11:00"]


def test_cron_is_in_the_heartbeat_timezone() -> None:
    schedule = Schedule("cron", cron="0 9 * * *")
    seen = datetime(2026, 7, 1, 0, 0, tzinfo=UTC)
    assert next_due(schedule, seen, None, NEW_YORK) == datetime(2026, 7, 1, 13, 0, tzinfo=UTC)


def test_cron_on_dst_days() -> None:
    schedule = Schedule("cron", cron="30 2 * * *")
    spring = berlin(2026, 3, 28, 12, 0)
    assert next_due(schedule, spring, spring, BERLIN).astimezone(BERLIN) == berlin(
        2026, 3, 29, 3, 0
    )
    clock = FakeClock(berlin(2026, 10, 24, 12, 0).astimezone(UTC))
    fired = run_ticks(
        schedule, clock.now(), None, clock, berlin(2026, 10, 25, 12, 0), tick=timedelta(minutes=5)
    )
    assert [f.astimezone(BERLIN).strftime("%H:%M %Z") for f in fired] == ["02:30 CEST"]


def test_cron_after_downtime_runs_once() -> None:
    schedule = Schedule("cron", cron="0 9 * * *")
    last = berlin(2026, 1, 5, 9, 0)
    back = berlin(2026, 1, 8, 12, 0)
    assert is_due(schedule, last, last, back, BERLIN)
    assert next_due(schedule, last, back, BERLIN) == berlin(2026, 1, 9, 9, 0)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        next_due(EVERY_HOUR, datetime(2026, 1, 1), None, BERLIN)


# --- active hours -----------------------------------------------------------


@pytest.mark.parametrize(
    ("local", "start", "end", "inside"),
    [
        ((2026, 1, 5, 8, 0), "08:00", "22:00", True),
        ((2026, 1, 5, 7, 59), "08:00", "22:00", False),
        ((2026, 1, 5, 21, 59), "08:00", "22:00", True),
        ((2026, 1, 5, 22, 0), "08:00", "22:00", False),
        ((2026, 1, 5, 23, 30), "22:00", "06:00", True),
        ((2026, 1, 6, 0, 15), "22:00", "06:00", True),
        ((2026, 1, 6, 5, 59), "22:00", "06:00", True),
        ((2026, 1, 6, 6, 0), "22:00", "06:00", False),
        ((2026, 1, 6, 12, 0), "22:00", "06:00", False),
        ((2026, 1, 6, 3, 0), "09:00", "09:00", True),
        ((2026, 3, 29, 3, 30), "08:00", "22:00", False),
        ((2026, 7, 1, 8, 30), "08:00", "22:00", True),
    ],
)
def test_active_hours_in_a_named_timezone(
    local: tuple[int, ...], start: str, end: str, inside: bool
) -> None:
    now = berlin(*local).astimezone(UTC)
    s, e = (time.fromisoformat(start), time.fromisoformat(end))
    assert in_active_hours(now, s, e, BERLIN) is inside


def test_active_hours_use_the_local_wall_clock_not_utc() -> None:
    # 23:30 UTC is 00:30 in Berlin (winter): inside 22:00-06:00 there, outside in New York (18:30).
    now = datetime(2026, 1, 5, 23, 30, tzinfo=UTC)
    assert in_active_hours(now, time(22), time(6), BERLIN)
    assert not in_active_hours(now, time(22), time(6), NEW_YORK)


def test_next_active_start() -> None:
    start, end = time(8), time(22)
    inside = berlin(2026, 1, 5, 12, 0)
    assert next_active_start(inside, start, end, BERLIN) == inside
    assert next_active_start(berlin(2026, 1, 5, 6, 0), start, end, BERLIN) == berlin(2026, 1, 5, 8)
    assert next_active_start(berlin(2026, 1, 5, 23, 0), start, end, BERLIN) == berlin(2026, 1, 6, 8)
    night = (time(22), time(6))
    assert next_active_start(berlin(2026, 1, 5, 12, 0), *night, BERLIN) == berlin(2026, 1, 5, 22)


# --- timezone ---------------------------------------------------------------


def test_timezone_from_config_wins() -> None:
    assert resolve_timezone("Europe/Berlin", local=lambda: "Asia/Tokyo").key == "Europe/Berlin"


def test_unknown_configured_timezone_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"bot\.heartbeat\.timezone"):
        resolve_timezone("Mars/Olympus_Mons")


def test_timezone_is_the_machines_when_config_has_none() -> None:
    assert resolve_timezone(None, local=lambda: "Asia/Tokyo").key == "Asia/Tokyo"
    assert resolve_timezone("Europe/Berlin", local=lambda: "Asia/Tokyo").key == "Europe/Berlin"


@pytest.mark.parametrize("found", [None, "", "CET-1CEST", "Not/A_Zone", "../../etc/passwd"])
def test_timezone_falls_back_to_utc(found: str | None) -> None:
    assert resolve_timezone(None, local=lambda: found).key == "UTC"


@pytest.mark.parametrize(
    ("tz_env", "expected"),
    [("Asia/Tokyo", "Asia/Tokyo"), (":America/New_York", "America/New_York")],
)
def test_the_machines_zone_honours_tz(
    monkeypatch: pytest.MonkeyPatch, tz_env: str, expected: str
) -> None:
    import tzlocal

    monkeypatch.setenv("TZ", tz_env)
    tzlocal.reload_localzone()
    try:
        assert local_zone_name() == expected
        assert resolve_timezone(None).key == expected
    finally:
        monkeypatch.undo()
        tzlocal.reload_localzone()
