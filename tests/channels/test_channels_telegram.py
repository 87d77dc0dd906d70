"""Telegram over the real python-telegram-bot (long polling) against a fake Bot API on loopback."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from tests.support.fake_telegram import FakeTelegram
from tests.support.outbound import send_reply
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.config.schema import Config
from vikingbot.delivery.types import OutboundMessage

OWNER = 4242
GROUP = -1001234


@pytest.fixture
def fake() -> Iterator[tuple[FakeTelegram, str]]:
    # an empty long poll returns after 0.2 s (0.5 s by default): a test waiting for
    # the next polls waits that much less
    telegram = FakeTelegram(max_poll_s=0.2)
    with telegram.serve() as api_base:
        yield telegram, api_base


def section(fake: FakeTelegram, api_base: str, **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "token": fake.token, "apiBase": api_base, **extra}


async def started(config: Config, bus: MessageBus, store: Any) -> ChannelManager:
    manager = ChannelManager(config, bus=bus, store=store, retry_delay_s=0.01)
    await manager.start()
    return manager


async def test_a_dm_to_the_bot_gets_an_answer(
    fake: tuple[FakeTelegram, str],
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
) -> None:
    telegram, api = fake
    config = make_config(owner=f"telegram:{OWNER}", telegram=section(telegram, api))
    manager = await started(config, bus, store)
    echo.manager = manager
    try:
        telegram.push_text(chat_id=OWNER, user_id=OWNER, text="hello bot")
        sent = await telegram.wait_sent(1)
        assert sent == [
            {
                "chat_id": str(OWNER),
                "text": "echo: hello bot",
                "message_thread_id": None,
                "parse_mode": "HTML",
            }
        ]
        assert echo.seen[0].sender_id == str(OWNER)
        assert manager.channel("telegram").bot_username == telegram.username  # type: ignore[union-attr]
    finally:
        await manager.stop()


async def test_each_update_is_handled_once(
    fake: tuple[FakeTelegram, str],
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
) -> None:
    telegram, api = fake
    config = make_config(owner=f"telegram:{OWNER}", telegram=section(telegram, api))
    manager = await started(config, bus, store)
    echo.manager = manager
    try:
        telegram.push_text(chat_id=OWNER, user_id=OWNER, text="one")
        await telegram.wait_sent(1)
        polls = telegram.polls
        await telegram.wait_polls(polls + 2)  # later polls moved the offset on
        telegram.push_text(chat_id=OWNER, user_id=OWNER, text="two")
        sent = await telegram.wait_sent(2)
        assert [s["text"] for s in sent] == ["echo: one", "echo: two"]
    finally:
        await manager.stop()


async def test_a_forum_topic_reply_stays_in_the_topic(
    fake: tuple[FakeTelegram, str],
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
) -> None:
    telegram, api = fake
    config = make_config(telegram=section(telegram, api, allowFrom=[str(GROUP)]))
    manager = await started(config, bus, store)
    echo.manager = manager
    try:
        telegram.push_text(
            chat_id=GROUP, user_id=77, text="in topic", thread=9, chat_type="supergroup"
        )
        sent = await telegram.wait_sent(1)
        assert sent[0]["chat_id"] == str(GROUP)
        assert sent[0]["message_thread_id"] == "9"
    finally:
        await manager.stop()


async def test_a_stranger_is_ignored_and_audited(
    fake: tuple[FakeTelegram, str],
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
    eventually: Callable[..., Awaitable[None]],
) -> None:
    telegram, api = fake
    config = make_config(telegram=section(telegram, api, ownerChat=str(OWNER), allowFrom=["1001"]))
    manager = await started(config, bus, store)
    echo.manager = manager
    try:
        telegram.push_text(chat_id=666, user_id=666, text="let me in")
        telegram.push_text(chat_id=1001, user_id=1001, text="friend")
        await telegram.wait_sent(1)
        await eventually(lambda: bool(store.audit_events(action="inbound.refuse")))
        [event] = store.audit_events(action="inbound.refuse")
        assert (event["actor"], event["subject"], event["outcome"]) == (
            "channel:telegram",
            "666",
            "ignored",
        )
        assert [m.text for m in echo.seen] == ["friend"]
        assert [s["chat_id"] for s in telegram.sent] == ["1001"]
    finally:
        await manager.stop()


async def test_markdown_arrives_formatted_as_telegram_html(
    fake: tuple[FakeTelegram, str], store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    telegram, api = fake
    manager = await started(make_config(telegram=section(telegram, api)), bus, store)
    try:
        text = "**Build red** since 02:10 & counting:\n\n- `make test` <fails>"
        assert await send_reply(
            manager, OutboundMessage("telegram", str(OWNER), text, dedupe_key="md-1")
        )
        sent = telegram.wait_for_sent(1)
        assert sent[0]["parse_mode"] == "HTML"
        assert sent[0]["text"] == (
            "<b>Build red</b> since 02:10 &amp; counting:\n\n• <code>make test</code> &lt;fails&gt;"
        )
    finally:
        await manager.stop()


async def test_a_long_reply_is_split_to_telegrams_limit(
    fake: tuple[FakeTelegram, str], store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    telegram, api = fake
    manager = await started(make_config(telegram=section(telegram, api)), bus, store)
    try:
        text = "\n".join(f"line {i}: " + "x" * 90 for i in range(120))
        assert await send_reply(
            manager, OutboundMessage("telegram", str(OWNER), text, dedupe_key="tl-1")
        )
        sent = telegram.wait_for_sent(1)
        assert len(sent) == 4
        assert all(len(s["text"]) <= 4000 for s in sent)
        assert "\n".join(s["text"] for s in sent) == text
    finally:
        await manager.stop()


async def test_flood_control_is_retried_and_a_blocked_chat_is_not(
    fake: tuple[FakeTelegram, str], store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    telegram, api = fake
    manager = await started(make_config(telegram=section(telegram, api)), bus, store)
    try:
        telegram.fail_next_send(429, "Too Many Requests: retry after 0", retry_after=0)
        assert await send_reply(
            manager, OutboundMessage("telegram", str(OWNER), "later", dedupe_key="f-1")
        )
        assert [s["text"] for s in telegram.sent] == ["later"]
        telegram.fail_next_send(403, "Forbidden: bot was blocked by the user")
        assert not await send_reply(
            manager, OutboundMessage("telegram", "555", "nope", dedupe_key="f-2")
        )
        row = manager.outbox.get("f-2")
        assert row is not None and (row.status, row.attempts) == ("failed", 1)
        assert "blocked" in (row.last_error or "")
    finally:
        await manager.stop()


async def test_a_wrong_token_is_reported_in_status(
    fake: tuple[FakeTelegram, str], store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    telegram, api = fake
    config = make_config(telegram=section(telegram, api, token="999:wrong"))
    manager = await started(config, bus, store)
    try:
        [row] = [r for r in manager.status() if r["name"] == "telegram"]
        assert row["running"] is False
        assert "getMe" in row["last_error"]
    finally:
        await manager.stop()
