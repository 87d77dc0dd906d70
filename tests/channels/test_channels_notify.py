"""Push notifications through the real Apprise library to a loopback ntfy-style endpoint."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from loguru import logger

from tests.support.outbound import delivery_for
from tests.support.push_endpoint import PushEndpoint
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.channels.notify import shown
from vikingbot.cli.channels_cmd import channel_rows
from vikingbot.config.schema import Config

SECRET_TOPIC = "phone-s3cr3t-topic"


@pytest.fixture(scope="module")
def push() -> Iterator[PushEndpoint]:
    with PushEndpoint.serving() as endpoint:
        yield endpoint


@pytest.fixture(autouse=True)
def fresh(push: PushEndpoint) -> None:
    with push.cond:
        push.received.clear()
        push.answers.clear()
        push.fail_every = 0
        push.requests = 0


def section(push: PushEndpoint, **extra: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "targets": {"phone": push.url(SECRET_TOPIC), "team": push.url("team", "json")},
        "spacingS": 0,
        **extra,
    }


async def started(config: Config, store: Any) -> ChannelManager:
    manager = ChannelManager(config, bus=MessageBus(), store=store, retry_delay_s=0.01)
    await manager.start()
    return manager


async def test_a_heartbeat_result_arrives_as_a_push_and_the_owner_can_be_a_target(
    push: PushEndpoint, store: Any, make_config: Callable[..., Config]
) -> None:
    manager = await started(make_config(owner="notify:phone", notify=section(push)), store)
    try:
        delivery = delivery_for(manager)
        one = await delivery.deliver(
            "The **nightly build** is red", "notify:team", source="heartbeat", dedupe_key="n1"
        )
        two = await delivery.deliver(
            "Remember the dentist", "owner", source="cron:x", dedupe_key="n2"
        )
        assert (one.status, two.status) == ("delivered", "delivered")
        got = push.wait_received(2)
        assert [(p.title, p.message) for p in got] == [
            ("vikingbot", "The **nightly build** is red"),
            ("vikingbot", "Remember the dentist"),
        ]
    finally:
        await manager.stop()


async def test_429_and_500_answers_are_retried_by_the_outbox_and_it_arrives_once(
    push: PushEndpoint, store: Any, make_config: Callable[..., Config]
) -> None:
    manager = await started(make_config(notify=section(push)), store)
    push.answers.extend([429, 500])
    try:
        report = await delivery_for(manager).deliver(
            "Disk almost full", "notify:phone", source="heartbeat", dedupe_key="n3"
        )
        assert report.status == "delivered"
        assert [p.message for p in push.wait_received(1)] == ["Disk almost full"]
        assert push.requests == 3
        row = manager.outbox.get("n3")
        assert row is not None and (row.status, row.attempts) == ("sent", 3)
    finally:
        await manager.stop()


async def test_a_push_that_keeps_failing_is_told_once_and_kept(
    push: PushEndpoint, store: Any, make_config: Callable[..., Config]
) -> None:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="ERROR")
    manager = await started(make_config(notify=section(push), send_retries=2), store)
    push.answers.extend([500] * 10)
    try:
        report = await delivery_for(manager).deliver(
            "Backup failed", "notify:phone", source="heartbeat", dedupe_key="n4"
        )
        assert report.status == "inboxed"
        assert push.requests == 3 and push.received == []
        row = manager.outbox.get("n4")
        assert row is not None and row.status == "failed" and "500" in str(row.last_error)
        told = [line for line in lines if "n4 not sent" in line]
        assert len(told) == 1 and "notify:phone" in told[0]
        assert SECRET_TOPIC not in " ".join(lines)
    finally:
        logger.remove(sink)
        await manager.stop()


def test_bad_urls_and_names_are_refused_when_the_config_is_set(
    make_config: Callable[..., Config],
) -> None:
    with pytest.raises(ValueError, match="not an Apprise URL"):
        make_config(notify={"enabled": True, "targets": {"phone": "not a url"}})
    with pytest.raises(ValueError, match="target name 'my phone'"):
        make_config(notify={"enabled": True, "targets": {"my phone": "ntfy://x/y"}})


def test_status_shows_what_apprise_cannot_use_without_the_secret(
    push: PushEndpoint, make_config: Callable[..., Config]
) -> None:
    config = make_config(
        notify=section(push, targets={"phone": push.url(SECRET_TOPIC), "odd": "nosuch://x/s3cr3t"})
    )
    (row,) = [r for r in channel_rows(config) if r["name"] == "notify"]
    assert row["configured"] and row["allow_from"] == ["phone", "odd"]
    assert len(row["notes"]) == 1 and "target odd" in row["notes"][0]
    assert "s3cr3t" not in str(row)
    assert SECRET_TOPIC not in shown(push.url(SECRET_TOPIC))
    dumped = config.model_dump(mode="json")["bot"]["channels"]["notify"]["targets"]
    assert SECRET_TOPIC not in str(dumped)
