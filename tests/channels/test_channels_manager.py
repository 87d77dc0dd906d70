"""The channel manager: the outbox makes sends exactly-once across restarts; allow-lists; cli."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.fake_slack import FakeSlack
from tests.support.outbound import send_reply
from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.channels.base import Channel
from vikingbot.channels.cli import CliChannel
from vikingbot.channels.manager import ChannelManager
from vikingbot.channels.text import split_text
from vikingbot.config.schema import ChannelBase, Config
from vikingbot.delivery.inbox import Inbox
from vikingbot.delivery.outbox import Outbox
from vikingbot.delivery.service import Outgoing
from vikingbot.delivery.types import OutboundMessage

OWNER_DM = "D0OWNER"


@pytest.fixture
def slack() -> Iterator[tuple[FakeSlack, dict[str, Any]]]:
    fake = FakeSlack()
    with fake.serve() as api_base:
        yield (
            fake,
            {
                "enabled": True,
                "botToken": fake.bot_token,
                "apiBase": api_base,
                "ownerChat": OWNER_DM,
            },
        )


async def test_a_pending_row_is_sent_exactly_once_after_a_restart(
    slack: tuple[FakeSlack, dict[str, Any]], store: Any, make_config: Callable[..., Config]
) -> None:
    fake, section = slack
    config = make_config(slack=section)
    # the previous gateway wrote the row, then died before the platform took it
    Outbox(store).claim(
        OutboundMessage("slack", OWNER_DM, "result from before the crash"), "run-41"
    )

    bus = MessageBus()
    manager = ChannelManager(config, bus=bus, store=store, retry_delay_s=0.01)
    await manager.start()
    assert await manager.wait_recovered() == 1
    # the heartbeat re-delivers the same run after the restart: nothing more goes out
    again = OutboundMessage("slack", OWNER_DM, "result from before the crash", dedupe_key="run-41")
    assert await send_reply(manager, again) is True
    await manager.stop()

    second = ChannelManager(config, bus=bus, store=store, retry_delay_s=0.01)
    await second.start()
    assert await second.wait_recovered() == 0
    assert await send_reply(second, again) is True
    await second.stop()

    assert [p["text"] for p in fake.posts] == ["result from before the crash"]
    row = Outbox(store).get("run-41")
    assert row is not None and row.status == "sent" and row.sent_at is not None


async def test_a_crash_between_pieces_does_not_repeat_the_first_pieces(
    slack: tuple[FakeSlack, dict[str, Any]], store: Any, make_config: Callable[..., Config]
) -> None:
    fake, section = slack
    text = "\n\n".join(f"part {i} " + "y" * 3000 for i in range(3))
    pieces = split_text(text, 4000)
    assert len(pieces) == 3
    outbox = Outbox(store)
    row = outbox.claim(OutboundMessage("slack", OWNER_DM, text), "run-long")
    outbox.part_sent(row, 1)  # piece 1 went out, then the process died

    manager = ChannelManager(make_config(slack=section), bus=MessageBus(), store=store)
    await manager.start()
    assert await manager.wait_recovered() == 1
    await manager.stop()
    assert [p["text"] for p in fake.posts] == pieces[1:]


async def test_every_message_goes_through_the_outbox_once(
    slack: tuple[FakeSlack, dict[str, Any]], store: Any, make_config: Callable[..., Config]
) -> None:
    fake, section = slack
    bus = MessageBus()
    manager = ChannelManager(make_config(slack=section), bus=bus, store=store)
    await manager.start()
    try:
        assert await send_reply(manager, OutboundMessage("slack", OWNER_DM, "no key given"))
        assert await send_reply(
            manager, OutboundMessage("slack", OWNER_DM, "keyed", dedupe_key="k")
        )
        assert await send_reply(
            manager, OutboundMessage("slack", OWNER_DM, "keyed", dedupe_key="k")
        )
    finally:
        await manager.stop()
    assert [p["text"] for p in fake.posts] == ["no key given", "keyed"]
    rows = Outbox(store).rows()
    assert [r.status for r in rows] == ["sent", "sent"]
    assert rows[0].dedupe_key.startswith("auto:")


async def test_a_failed_row_is_tried_again_when_the_run_redelivers(
    slack: tuple[FakeSlack, dict[str, Any]], store: Any, make_config: Callable[..., Config]
) -> None:
    fake, section = slack
    bus = MessageBus()
    config = make_config(slack=section, send_retries=0)
    manager = ChannelManager(config, bus=bus, store=store)
    await manager.start()
    try:
        fake.fail_next_post("internal_error", status=500)
        msg = OutboundMessage("slack", OWNER_DM, "second time lucky", dedupe_key="run-9")
        assert await send_reply(manager, msg) is False
        assert Outbox(store).get("run-9").status == "failed"  # type: ignore[union-attr]
        assert await send_reply(manager, msg) is True
    finally:
        await manager.stop()
    assert [p["text"] for p in fake.posts] == ["second time lucky"]


async def test_a_message_for_a_channel_that_is_not_enabled_fails_loudly(
    store: Any, make_config: Callable[..., Config]
) -> None:
    bus = MessageBus()
    manager = ChannelManager(make_config(), bus=bus, store=store)
    await manager.start()
    try:
        assert (
            await send_reply(manager, OutboundMessage("telegram", "1", "hi", dedupe_key="x"))
            is False
        )
        row = Outbox(store).get("x")
        assert row is not None and row.status == "failed"
        assert "'telegram' is not enabled" in (row.last_error or "")
        # not lost: the reply waits in the inbox
        assert [item.text for item in Inbox(store).items()] == ["hi"]
    finally:
        await manager.stop()


async def test_the_manager_sends_only_what_the_delivery_service_resolved(
    slack: tuple[FakeSlack, dict[str, Any]], store: Any, make_config: Callable[..., Config]
) -> None:
    """One outbound path: a bare message, or a forged sealed one, never reaches a channel."""
    fake, section = slack
    manager = ChannelManager(make_config(slack=section), bus=MessageBus(), store=store)
    await manager.start()
    try:
        bare = OutboundMessage("slack", "C0STRANGER", "around delivery", dedupe_key="b-1")
        with pytest.raises(TypeError, match="only what the delivery service resolved"):
            await manager.send(bare)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="made only by"):
            Outgoing(bare, source="forged", seal=object())
        assert await send_reply(manager, OutboundMessage("slack", OWNER_DM, "resolved"))
    finally:
        await manager.stop()
    assert [p["text"] for p in fake.posts] == ["resolved"]
    assert Outbox(store).get("b-1") is None


async def test_the_cli_channel_prints_replies_and_takes_typed_lines(
    store: Any, make_config: Callable[..., Config]
) -> None:
    bus = MessageBus()
    manager = ChannelManager(make_config(cli={"enabled": True}), bus=bus, store=store)
    await manager.start()
    try:
        cli = manager.channel("cli")
        assert isinstance(cli, CliChannel)
        cli.stream = io.StringIO()
        long = "\n\n".join(["paragraph " * 50] * 20)
        assert await send_reply(manager, OutboundMessage("cli", "local", long, dedupe_key="c-1"))
        assert cli.stream.getvalue() == long.strip() + "\n"  # no splitting on a terminal
        await cli.submit("hello there")
        inbound = await bus.next_inbound()
        assert (inbound.channel, inbound.chat_id, inbound.text) == ("cli", "local", "hello there")
    finally:
        await manager.stop()


class _Probe(Channel):
    name = "probe"

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus

    async def stop(self) -> None:
        pass

    async def send(self, msg: OutboundMessage) -> None:
        pass


@pytest.mark.parametrize(
    ("allow_from", "owner", "sender", "chat", "allowed"),
    [
        ([], None, "U1", "D1", False),  # empty list: only the owner's chat...
        ([], "D1", "U1", "D1", True),  # ...which is always allowed
        ([], "D1", "U1", "D2", False),
        (["U1"], None, "U1", "C9", True),  # a listed sender, anywhere
        (["C9"], None, "U2", "C9", True),  # anyone in a listed chat
        (["C9"], None, "U2", "C8", False),
        (["*"], None, "anyone", "anywhere", True),
        (["u1"], None, "U1", "D1", False),  # ids are exact
    ],
)
def test_allow_from(
    allow_from: list[str], owner: str | None, sender: str, chat: str, allowed: bool
) -> None:
    probe = _Probe(ChannelBase(enabled=True, allow_from=allow_from), owner_chat=owner)
    assert probe.allowed(sender, chat) is allowed


async def test_a_stranger_is_audited_once_per_window_not_per_message(store: Any) -> None:
    from vikingbot.clock import FakeClock

    clock = FakeClock()
    probe = _Probe(ChannelBase(enabled=True), owner_chat="D1", store=store, clock=clock)
    await probe.start(MessageBus())
    for _ in range(5):
        assert not await probe.accept(InboundMessage("probe", "D666", "U666", "spam"))
    assert len(store.audit_events(action="inbound.refuse")) == 1
    clock.advance(minutes=11)
    assert not await probe.accept(InboundMessage("probe", "D666", "U666", "spam"))
    assert len(store.audit_events(action="inbound.refuse")) == 2
