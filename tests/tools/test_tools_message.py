"""The message tool: it sends only through the turn's deliverer, and says what became of it."""

from __future__ import annotations

import pytest

from vikingbot.errors import ToolError
from vikingbot.tools.base import DeliveryStatus, ToolContext
from vikingbot.tools.message import MessageTool


async def test_a_given_deliver_takes_the_message_and_says_what_became_of_it(
    ctx: ToolContext,
) -> None:
    statuses: list[DeliveryStatus] = ["delivered", "inboxed", "failed"]
    calls: list[tuple[str, str | None]] = []

    async def deliver(text: str, target: str | None = None) -> DeliveryStatus:
        calls.append((text, target))
        return statuses.pop(0)

    ctx.deliver = deliver
    assert await MessageTool().run({"text": "one"}, ctx) == "message delivered"
    inboxed = await MessageTool().run({"text": "two", "target": " slack:C1 "}, ctx)
    assert "inbox" in inboxed
    with pytest.raises(ToolError, match="could not be delivered"):
        await MessageTool().run({"text": "three"}, ctx)
    assert calls == [("one", None), ("two", "slack:C1"), ("three", None)]
    assert (ctx.message_attempts, ctx.messages_sent) == (3, 2)


async def test_heartbeat_tokens_never_reach_the_user(ctx: ToolContext) -> None:
    calls: list[str] = []

    async def deliver(text: str, target: str | None = None) -> DeliveryStatus:
        calls.append(text)
        return "delivered"

    ctx.deliver = deliver
    await MessageTool().run({"text": "Build is green. HEARTBEAT_KEEP"}, ctx)
    assert calls == ["Build is green."]
    with pytest.raises(ToolError, match="nothing to send"):
        await MessageTool().run({"text": "HEARTBEAT_OK"}, ctx)


async def test_without_a_deliverer_nothing_is_sent(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="no way to send"):
        await MessageTool().run({"text": "hi", "target": "telegram:999"}, ctx)
    assert ctx.messages_sent == 0
