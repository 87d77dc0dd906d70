"""The audit log and timestamps, on SQLite and PostgreSQL (the ``store`` fixture)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy.exc import StatementError

from vikingbot.clock import FakeClock
from vikingbot.errors import StoreError
from vikingbot.store import StateStore
from vikingbot.store.tables import audit_events

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def test_an_event_reads_back_as_written(store: StateStore) -> None:
    store.clock = FakeClock(T0)
    store.audit(
        "heartbeat",
        "delivery.refuse",
        "slack:C999",
        "refused",
        reason="not on the channel allowlist",
        details={"entry": "Check CI", "fallback": "owner", "tries": [1, 2]},
    )
    assert store.audit_events() == [
        {
            "id": 1,
            "at": T0,
            "actor": "heartbeat",
            "action": "delivery.refuse",
            "subject": "slack:C999",
            "outcome": "refused",
            "reason": "not on the channel allowlist",
            "details": {"entry": "Check CI", "fallback": "owner", "tries": [1, 2]},
        }
    ]


def test_newest_first_with_limit_and_action_filter(store: StateStore) -> None:
    clock = FakeClock(T0)
    store.clock = clock
    store.audit("heartbeat", "tool.approve", "read_file", "approved")
    clock.advance(minutes=1)
    store.audit("heartbeat", "tool.deny", "exec", "denied", reason="not in safe_tools")
    store.audit("heartbeat", "tool.approve", "message", "approved")  # same instant as the deny
    clock.advance(minutes=1)
    store.audit("cron:daily", "tool.approve", "web_fetch", "approved")

    assert [e["subject"] for e in store.audit_events()] == [
        "web_fetch",
        "message",
        "exec",
        "read_file",
    ]
    assert [e["subject"] for e in store.audit_events(limit=2)] == ["web_fetch", "message"]
    assert [e["subject"] for e in store.audit_events(action="tool.deny")] == ["exec"]
    assert store.audit_events(action="delivery.refuse") == []


def test_times_come_back_in_utc_whatever_zone_they_were_written_in(store: StateStore) -> None:
    oslo_winter = timezone(timedelta(hours=1))
    store.clock = FakeClock(datetime(2026, 1, 5, 13, 0, tzinfo=oslo_winter))
    store.audit("user", "heartbeat.pause", "shared", "paused")
    (event,) = store.audit_events()
    assert event["at"] == datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    assert event["at"].utcoffset() == timedelta(0)


def test_naive_times_are_refused_rather_than_guessed(store: StateStore) -> None:
    row = {"actor": "x", "action": "y", "subject": "z", "outcome": "ok"}
    with pytest.raises(StatementError, match="naive datetime"), store.engine.begin() as conn:
        conn.execute(audit_events.insert().values(at=datetime(2026, 1, 5, 12, 0), **row))
    assert store.audit_events() == []


def test_huge_texts_are_shortened_not_lost(store: StateStore) -> None:
    target = "slack:" + "C" * 2000  # an untrusted deliver: tag can be this long
    store.audit("heartbeat", "delivery.refuse", target, "refused", reason="x" * 10_000)
    (event,) = store.audit_events()
    assert event["subject"].startswith("slack:CCCC")
    assert len(event["subject"]) == audit_events.c.subject.type.length
    assert event["subject"].endswith("…")
    assert event["reason"] == "x" * 10_000


def test_details_that_are_not_plain_json_are_recorded_as_text(store: StateStore) -> None:
    store.audit("user", "tool.approve", "write_file", "approved", details={"path": Path("/w/a.md")})
    assert store.audit_events()[0]["details"] == {"path": "/w/a.md"}


def test_database_failures_become_store_errors_naming_the_database(store: StateStore) -> None:
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE audit_events")
    with pytest.raises(StoreError) as info:
        store.audit("user", "tool.approve", "exec", "approved")
    assert str(info.value).startswith(f"state database {store.url}: cannot write audit event")
    with pytest.raises(StoreError, match="cannot read audit events"):
        store.audit_events()
