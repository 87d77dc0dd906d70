"""The cron_jobs repository: add refuses bad jobs clearly; enable, disable, remove."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vikingbot.clock import FakeClock
from vikingbot.cron.jobs import CronJobs
from vikingbot.errors import CronError
from vikingbot.store.db import StateStore

START = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
def jobs(store: StateStore) -> CronJobs:
    return CronJobs(store, FakeClock(START))


def test_add_stores_the_job_with_its_first_run(jobs: CronJobs) -> None:
    job = jobs.add("digest", "cron", "0 8 * * *", " Summarise the news ", timezone="Europe/Berlin")
    assert job.next_run_at == datetime(2026, 1, 6, 7, 0, tzinfo=UTC)
    assert job.prompt == "Summarise the news"
    assert [j.name for j in jobs.list()] == ["digest"]
    assert jobs.get("digest") == job


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "cron", "expr": "0 9 * * *", "timezone": "Berlin"}, "unknown IANA timezone"),
        ({"kind": "cron", "expr": "every monday"}, "needs 5 fields"),
        ({"kind": "at", "expr": "2025-12-31T23:00"}, "is in the past"),
        ({"kind": "every", "expr": "30m", "prompt": "  "}, "needs a prompt"),
        ({"kind": "every", "expr": "30m", "timeout_s": 0}, "timeout must be positive"),
        ({"kind": "every", "expr": "30m", "target": "myspace:123"}, "unknown channel 'myspace'"),
        ({"kind": "every", "expr": "30m", "target": "slack:a b"}, "bad target"),
    ],
)
def test_add_refuses_invalid_jobs(jobs: CronJobs, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"prompt": "p", **kwargs}
    with pytest.raises(CronError, match=message):
        jobs.add("bad", **args)  # type: ignore[arg-type]
    assert jobs.list() == []


def test_add_refuses_a_duplicate_name(jobs: CronJobs) -> None:
    jobs.add("a", "every", "1h", "p")
    with pytest.raises(CronError, match="already exists"):
        jobs.add("a", "every", "2h", "q")
    assert jobs.require("a").expr == "1h"


def test_disable_and_enable_replan_from_now(jobs: CronJobs) -> None:
    jobs.add("a", "every", "1h", "p")
    assert jobs.set_enabled("a", False).next_run_at is None
    jobs.clock.advance(hours=5, minutes=30)  # type: ignore[attr-defined]
    job = jobs.set_enabled("a", True)
    assert job.enabled and job.next_run_at == START + timedelta(hours=6)


def test_enable_refuses_a_one_shot_that_has_passed(jobs: CronJobs) -> None:
    jobs.add("once", "at", "2026-01-05T13:00Z", "p")
    jobs.set_enabled("once", False)
    jobs.clock.advance(hours=2)  # type: ignore[attr-defined]
    with pytest.raises(CronError, match="no run left"):
        jobs.set_enabled("once", True)


def test_remove_and_unknown_names(jobs: CronJobs) -> None:
    jobs.add("a", "every", "1h", "p")
    assert jobs.remove("a").name == "a"
    with pytest.raises(CronError, match="no cron job named 'a'"):
        jobs.remove("a")
