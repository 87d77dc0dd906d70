"""The message tool: where a message goes, dedupe keys, tokens stripped, refusals."""

from __future__ import annotations

import pytest

from vikingbot.bus import MessageBus, OutboundMessage
from vikingbot.errors import ToolError
from vikingbot.session.types import SessionKey
from vikingbot.tools.base import DeliveryStatus, ToolContext
from vikingbot.tools.message import MessageTool, parse_target


@pytest.fixture
def sent(ctx: ToolContext) -> list[OutboundMessage]:
    out: list[OutboundMessage] = []

    async def accept(msg: OutboundMessage) -> bool:
        out.append(msg)
        return True

    assert ctx.bus is not None
    ctx.bus.set_outbound_handler(accept)
    return out


async def test_defaults_to_the_sessions_own_chat(
    ctx: ToolContext, sent: list[OutboundMessage]
) -> None:
    ctx.session_key = SessionKey("slack", "T01", "C42")
    assert await MessageTool().run({"text": "hello"}, ctx) == "message sent to slack:C42"
    assert (sent[0].channel, sent[0].channel_id, sent[0].chat_id) == ("slack", "T01", "C42")
    assert sent[0].dedupe_key is None
    assert ctx.messages_sent == 1


async def test_reply_to_then_explicit_target(ctx: ToolContext, sent: list[OutboundMessage]) -> None:
    ctx.metadata = {"reply_to": "telegram:123:9", "run_id": "run7"}
    await MessageTool().run({"text": "one"}, ctx)
    await MessageTool().run({"text": "two", "target": "slack:C1"}, ctx)
    assert [(m.channel, m.chat_id, m.thread) for m in sent] == [
        ("telegram", "123", "9"),
        ("slack", "C1", None),
    ]
    assert [m.dedupe_key for m in sent] == ["run7:1", "run7:2"]
    assert sent[1].metadata["explicit_target"] is True


async def test_heartbeat_tokens_never_reach_the_user(
    ctx: ToolContext, sent: list[OutboundMessage]
) -> None:
    await MessageTool().run({"text": "Build is green. HEARTBEAT_KEEP"}, ctx)
    assert sent[0].text == "Build is green."
    with pytest.raises(ToolError, match="nothing to send"):
        await MessageTool().run({"text": "HEARTBEAT_OK"}, ctx)


async def test_refusals_come_back_as_tool_errors(ctx: ToolContext) -> None:
    async def refuse(msg: OutboundMessage) -> bool:
        return False

    assert ctx.bus is not None
    ctx.bus.set_outbound_handler(refuse)
    with pytest.raises(ToolError, match="delivery to cli:local was not accepted"):
        await MessageTool().run({"text": "hi"}, ctx)
    assert ctx.messages_sent == 0

    ctx.session_key = SessionKey("heartbeat", "default", "shared")
    with pytest.raises(ToolError, match="no chat to reply to"):
        await MessageTool().run({"text": "hi"}, ctx)

    ctx.bus = None
    with pytest.raises(ToolError, match="no way to send"):
        await MessageTool().run({"text": "hi"}, ctx)


async def test_without_a_handler_the_bus_keeps_the_message(ctx: ToolContext) -> None:
    bus = MessageBus()
    ctx.bus = bus
    with pytest.raises(ToolError, match="not accepted"):
        await MessageTool().run({"text": "kept"}, ctx)
    assert [m.text for m in bus.undelivered] == ["kept"]


def test_parse_target() -> None:
    assert tuple(parse_target("slack:C1:171.2")) == ("slack", "C1", "171.2", "default")
    assert tuple(parse_target("slack:")) == ("slack", "", None, "default")
    with pytest.raises(ToolError):
        parse_target(":C1")


async def test_a_given_deliver_takes_the_message_and_says_what_became_of_it(
    ctx: ToolContext, sent: list[OutboundMessage]
) -> None:
    statuses: list[DeliveryStatus] = ["delivered", "inboxed", "failed"]
    calls: list[tuple[str, str | None]] = []

    async def deliver(text: str, target: str | None = None) -> DeliveryStatus:
        calls.append((text, target))
        return statuses.pop(0)

    ctx.deliver = deliver
    assert await MessageTool().run({"text": "one"}, ctx) == "message delivered"
    inboxed = await MessageTool().run({"text": "two", "target": "slack:C1"}, ctx)
    assert "inbox" in inboxed
    with pytest.raises(ToolError, match="could not be delivered"):
        await MessageTool().run({"text": "three"}, ctx)
    assert calls == [("one", None), ("two", "slack:C1"), ("three", None)]
    assert ctx.messages_sent == 2
    assert sent == []  # the bus is not used when the caller gave a deliver
