"""A small typed bus from channels to the agent.

Inbound messages queue up for the agent. Nothing goes out through the bus: every
outbound message is resolved by the delivery service and handed to the channel
manager as a sealed value (``vikingbot.delivery.service.Outgoing``).
"""

from __future__ import annotations

import asyncio

from vikingbot.bus.events import InboundMessage


class MessageBus:
    def __init__(self, max_inbound: int = 1000) -> None:
        self._inbound: asyncio.Queue[InboundMessage] = asyncio.Queue(maxsize=max_inbound)

    async def publish_inbound(self, msg: InboundMessage) -> None:
        await self._inbound.put(msg)

    async def next_inbound(self) -> InboundMessage:
        return await self._inbound.get()
