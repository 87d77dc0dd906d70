"""One grammar per idea: durations, times of day and cron expressions read the same in
HEARTBEAT.md, the config file, the CLI and the agent's cron tool."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vikingbot.config.schema import Config
from vikingbot.cron import schedule
from vikingbot.errors import CronError
from vikingbot.grammar import cron_problem, duration_s, time_of_day, to_seconds
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.redact import mask_url


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("1.5h", 5400), ("10 M", 600)],
)
def test_durations_with_a_unit(text: str, seconds: float) -> None:
    assert duration_s(text) == seconds
    assert to_seconds(text) == seconds
    assert schedule.parse_every(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["30", "2 days", "1h30m", "-5m", "٣h", "", "m", "5x"])
def test_anything_else_is_not_a_duration(text: str) -> None:
    assert duration_s(text) is None
    with pytest.raises(ValueError, match="expected a duration"):
        to_seconds(text)


def test_a_bare_number_is_refused_in_every_place_a_person_types_it() -> None:
    """`every: 30` in HEARTBEAT.md and `cron add --every 30` used to disagree."""
    with pytest.raises(ValueError, match=r"write 30s or 30m"):
        to_seconds("30")
    with pytest.raises(CronError, match=r"bad 'every' interval '30': .*write 30s or 30m"):
        schedule.validate("every", "30")
    doc = parse_heartbeat("- every: 30 title: Water\n")
    assert [e.message for e in doc.errors] == [
        "every: needs a duration above zero like 90s, 30m, 2h or 1d, got '30'"
    ]
    with pytest.raises(ValueError, match="staleAfter"):
        Config.model_validate({"bot": {"heartbeat": {"staleAfter": "30"}}})
    # A JSON number in the config file has no unit to give: it is seconds.
    config = Config.model_validate({"bot": {"heartbeat": {"staleAfter": 30}}})
    assert config.bot.heartbeat.stale_after == 30


def test_times_of_day() -> None:
    assert time_of_day("09:30") == (9, 30)
    assert time_of_day("9:05") == (9, 5)
    assert time_of_day("24:00") is None
    assert time_of_day("24:00", allow_24=True) == (24, 0)
    for bad in ("24:01", "9am", "12:60", "٠٩:٣٠", "", "1:2"):
        assert time_of_day(bad, allow_24=True) is None


@pytest.mark.parametrize("expr", ["0 9 31 2 *", "0 25 * * *", "0 9 * *", "@daily", "0 9 * * $"])
def test_one_cron_validator_for_heartbeat_and_cron_jobs(expr: str) -> None:
    """The HEARTBEAT.md parser and `cron add` refuse the same expressions, for one reason."""
    reason = cron_problem(expr)
    assert reason is not None
    with pytest.raises(CronError) as info:
        schedule.validate("cron", expr)
    assert reason in str(info.value)
    doc = parse_heartbeat(f'- cron: "{expr}" title: X\n')
    assert len(doc.errors) == 1 and reason in doc.errors[0].message


def test_a_good_cron_expression_is_accepted_everywhere() -> None:
    assert cron_problem("0  9 * * 1-5") is None
    assert schedule.validate("cron", "0  9 * * 1-5") == "0 9 * * 1-5"
    doc = parse_heartbeat('- cron: "0 9 * * 1-5" title: X\n')
    assert doc.errors == () and len(doc.scheduled) == 1


@given(st.text(max_size=60))
def test_the_grammars_never_raise_on_any_text(text: str) -> None:
    duration_s(text)
    time_of_day(text, allow_24=True)
    cron_problem(text)
    with pytest.raises(ValueError) if duration_s(text) is None else _nothing():
        to_seconds(text)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://me:s3cret@db:5432/x", "postgresql://me:***@db:5432/x"),
        ("postgresql://me@db/x", "postgresql://me@db/x"),
        ("sqlite:////home/me/state.db", "sqlite:////home/me/state.db"),
    ],
)
def test_passwords_in_urls_are_masked(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_due_is_crons_word_for_what_a_tick_does() -> None:
    from vikingbot.cron.types import CronJob

    now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    job = CronJob(
        id=1, name="j", kind="every", expr="30m", timezone="UTC", prompt="p", created_at=now
    )
    assert schedule.decide(job, now) == "schedule"
