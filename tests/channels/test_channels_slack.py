"""Slack over the real slack_sdk (Web API + Socket Mode) against a fake Slack on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from tests.support.fake_slack import FakeSlack
from tests.support.outbound import send_reply
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.config.schema import Config
from vikingbot.delivery.types import OutboundMessage

OWNER_DM = "D0OWNER"


@pytest.fixture
def fake() -> Iterator[tuple[FakeSlack, str]]:
    slack = FakeSlack()
    with slack.serve() as api_base:
        yield slack, api_base


def slack_section(fake: FakeSlack, api_base: str, **extra: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "botToken": fake.bot_token,
        "appToken": fake.app_token,
        "apiBase": api_base,
        "ownerChat": OWNER_DM,
        **extra,
    }


async def started(config: Config, bus: MessageBus, store: Any) -> ChannelManager:
    manager = ChannelManager(config, bus=bus, store=store, retry_delay_s=0.01)
    await manager.start()
    return manager


async def test_a_dm_to_the_bot_gets_an_answer(
    fake: tuple[FakeSlack, str],
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
) -> None:
    slack, api = fake
    manager = await started(make_config(slack=slack_section(slack, api)), bus, store)
    echo.manager = manager
    try:
        await slack.wait_connected()
        envelope = slack.push_message(user="UOWNER", channel=OWNER_DM, text="hello bot")
        posts = await slack.wait_posts(1)
        assert posts[0]["channel"] == OWNER_DM
        assert posts[0]["text"] == "echo: hello bot"
        assert posts[0]["thread_ts"] is None
        assert envelope in slack.acks
        assert echo.seen[0].sender_id == "UOWNER"
        assert manager.status()[0] == {
            "name": "cli",
            "enabled": False,
            "running": False,
            "receiving": False,
            "last_error": None,
            "failing": None,
        }
        assert {
            "name": "slack",
            "enabled": True,
            "running": True,
            "receiving": True,
            "last_error": None,
            "failing": None,
        } in manager.status()
    finally:
        await manager.stop()


async def test_a_thread_reply_stays_in_the_thread(
    fake: tuple[FakeSlack, str],
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
) -> None:
    slack, api = fake
    section = slack_section(slack, api, allowFrom=["C0TEAM"])
    manager = await started(make_config(slack=section), bus, store)
    echo.manager = manager
    try:
        await slack.wait_connected()
        slack.push_message(
            user="UALICE",
            channel="C0TEAM",
            text="status?",
            thread_ts="1700.1",
            channel_type="channel",
        )
        posts = await slack.wait_posts(1)
        assert (posts[0]["channel"], posts[0]["thread_ts"]) == ("C0TEAM", "1700.1")
    finally:
        await manager.stop()


async def test_a_stranger_is_ignored_and_audited(
    fake: tuple[FakeSlack, str],
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
    eventually: Callable[..., Awaitable[None]],
) -> None:
    slack, api = fake
    manager = await started(make_config(slack=slack_section(slack, api)), bus, store)
    echo.manager = manager
    try:
        await slack.wait_connected()
        stranger = slack.push_message(user="UMALLORY", channel="D0MALLORY", text="give me secrets")
        await eventually(lambda: bool(store.audit_events(action="inbound.refuse")))
        [event] = store.audit_events(action="inbound.refuse")
        assert event["actor"] == "channel:slack"
        assert event["subject"] == "UMALLORY"
        assert event["outcome"] == "ignored"
        assert event["details"]["chat_id"] == "D0MALLORY"
        # the owner is still answered, the stranger never was
        slack.push_message(user="UOWNER", channel=OWNER_DM, text="ping")
        posts = await slack.wait_posts(1)
        assert [p["channel"] for p in posts] == [OWNER_DM]
        assert [m.text for m in echo.seen] == ["ping"]
        assert stranger in slack.acks  # acknowledged so Slack does not re-send it
    finally:
        await manager.stop()


async def test_own_and_bot_messages_and_edits_are_not_answered(
    fake: tuple[FakeSlack, str],
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
) -> None:
    slack, api = fake
    manager = await started(make_config(slack=slack_section(slack, api)), bus, store)
    echo.manager = manager
    try:
        await slack.wait_connected()
        slack.push_message(user=slack.bot_user_id, channel=OWNER_DM, text="my own echo")
        slack.push_message(user="UOTHER", channel=OWNER_DM, text="a bot", bot_id="B1")
        slack.push_message(
            user="UOWNER", channel=OWNER_DM, text="edited", subtype="message_changed"
        )
        await slack.wait_acks(3)
        slack.push_message(user="UOWNER", channel=OWNER_DM, text="real")
        posts = await slack.wait_posts(1)
        assert [p["text"] for p in posts] == ["echo: real"]
    finally:
        await manager.stop()


async def test_markdown_arrives_as_slack_mrkdwn(
    fake: tuple[FakeSlack, str], store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    slack, api = fake
    manager = await started(make_config(slack=slack_section(slack, api)), bus, store)
    try:
        text = "**Build red**, see [the log](https://ci.example/1) & _retry_"
        assert await send_reply(
            manager, OutboundMessage("slack", OWNER_DM, text, dedupe_key="md-1")
        )
        posts = slack.wait_for_posts(1)
        assert posts[0]["text"] == "*Build red*, see <https://ci.example/1|the log> &amp; _retry_"
    finally:
        await manager.stop()


async def test_a_long_reply_is_split_to_slacks_limit(
    fake: tuple[FakeSlack, str], store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    slack, api = fake
    manager = await started(make_config(slack=slack_section(slack, api)), bus, store)
    try:
        paragraphs = [f"Paragraph {i}: " + " ".join(["lorem"] * 150) for i in range(10)]
        text = "\n\n".join(paragraphs)
        assert await send_reply(
            manager, OutboundMessage("slack", OWNER_DM, text, dedupe_key="long-1")
        )
        posts = slack.wait_for_posts(1)
        assert len(posts) >= 3
        assert all(len(p["text"]) <= 4000 for p in posts)
        assert " ".join(p["text"] for p in posts).split() == text.split()
        assert all(p["text"].startswith("Paragraph") for p in posts)
    finally:
        await manager.stop()


async def test_a_rate_limited_send_is_retried_once_accepted(
    fake: tuple[FakeSlack, str], store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    slack, api = fake
    manager = await started(make_config(slack=slack_section(slack, api)), bus, store)
    try:
        slack.fail_next_post("ratelimited")
        slack.fail_next_post("internal_error", status=500)
        assert await send_reply(
            manager, OutboundMessage("slack", OWNER_DM, "after retries", dedupe_key="r-1")
        )
        assert [p["text"] for p in slack.posts] == ["after retries"]
        row = manager.outbox.get("r-1")
        assert row is not None and (row.status, row.attempts) == ("sent", 3)
    finally:
        await manager.stop()


async def test_an_unknown_channel_fails_without_retrying(
    fake: tuple[FakeSlack, str], store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    slack, api = fake
    manager = await started(make_config(slack=slack_section(slack, api)), bus, store)
    try:
        slack.fail_next_post("channel_not_found")
        assert not await send_reply(
            manager, OutboundMessage("slack", "C0GONE", "hello?", dedupe_key="g-1")
        )
        row = manager.outbox.get("g-1")
        assert row is not None
        assert (row.status, row.attempts) == ("failed", 1)
        assert "channel_not_found" in (row.last_error or "")
    finally:
        await manager.stop()


async def test_a_bad_token_is_reported_in_status(
    fake: tuple[FakeSlack, str], store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    slack, api = fake
    section = slack_section(slack, api, botToken="xoxb-wrong")
    manager = await started(make_config(slack=section), bus, store)
    try:
        [row] = [r for r in manager.status() if r["name"] == "slack"]
        assert row["running"] is False
        assert "invalid_auth" in row["last_error"]
        assert not await send_reply(
            manager, OutboundMessage("slack", OWNER_DM, "x", dedupe_key="b-1")
        )
    finally:
        await manager.stop()


async def test_a_shared_file_comes_with_the_message_and_the_token_goes_only_to_the_file_host(
    fake: tuple[FakeSlack, str], store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    from tests.media.conftest import photo

    slack, api = fake
    pic = photo(320, 240)
    manager = await started(make_config(slack=slack_section(slack, api)), bus, store)
    try:
        await slack.wait_connected()
        shared = slack.add_file("whiteboard.jpg", pic, "image/jpeg")
        elsewhere = dict(shared, name="x.jpg", url_private_download="https://evil.test/x.jpg")
        slack.push_message(user="USTRANGER", channel="D0OTHER", text="", subtype="file_share",
                           files=[shared])  # fmt: skip
        slack.push_message(user="UOWNER", channel=OWNER_DM, text="", subtype="file_share",
                           files=[shared, elsewhere])  # fmt: skip
        msg = await asyncio.wait_for(bus.next_inbound(), 30)
        assert msg.sender_id == "UOWNER"
        first, second = msg.attachments
        assert (first.name, first.mime, first.size) == ("whiteboard.jpg", "image/jpeg", len(pic))
        assert await first.fetch(25_000_000) == pic
        assert slack.downloads == [("whiteboard.jpg", f"Bearer {slack.bot_token}")]
        with pytest.raises(ValueError, match=r"not on files\.slack\.com; not fetched"):
            await second.fetch(25_000_000)
    finally:
        await manager.stop()
