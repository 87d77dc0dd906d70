"""A small typed bus between channels and the agent.

Inbound messages queue up for the agent; outbound messages go to one handler
(the channel manager's outbox-backed sender) and the sender awaits the result,
so a tool knows whether its message was accepted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from loguru import logger

from vikingbot.bus.events import InboundMessage, OutboundMessage

OutboundHandler = Callable[[OutboundMessage], Awaitable[bool]]


class MessageBus:
    def __init__(self, max_inbound: int = 1000) -> None:
        self._inbound: asyncio.Queue[InboundMessage] = asyncio.Queue(maxsize=max_inbound)
        self._outbound: OutboundHandler | None = None
        self.undelivered: list[OutboundMessage] = []

    async def publish_inbound(self, msg: InboundMessage) -> None:
        await self._inbound.put(msg)

    async def next_inbound(self) -> InboundMessage:
        return await self._inbound.get()

    def set_outbound_handler(self, handler: OutboundHandler | None) -> None:
        self._outbound = handler

    async def send(self, msg: OutboundMessage) -> bool:
        """Hand a message to the outbound handler; True when it was accepted.

        With no handler (e.g. a one-shot CLI run) the message is kept in
        ``undelivered`` and logged, never silently dropped.
        """
        if self._outbound is None:
            logger.warning(
                "no outbound handler; keeping message for {}:{}", msg.channel, msg.chat_id
            )
            self.undelivered.append(msg)
            return False
        return await self._outbound(msg)
