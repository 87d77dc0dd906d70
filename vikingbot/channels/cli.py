"""The terminal as a channel: replies are printed, typed lines become inbound messages.

Used by ``vikingbot chat``. The person at the terminal is the owner, so every
message is allowed. Its chat id is ``local`` unless ``owner_chat`` says otherwise.
"""

from __future__ import annotations

import sys
from typing import ClassVar, TextIO

from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.channels.base import Channel
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelError

LOCAL_CHAT = "local"


class CliChannel(Channel):
    name: ClassVar[str] = "cli"
    max_message_chars: ClassVar[int | None] = None

    stream: TextIO | None = None  # where replies go; None means sys.stdout at send time

    @property
    def chat_id(self) -> str:
        return self.owner_chat or LOCAL_CHAT

    def allowed(self, sender_id: str, chat_id: str) -> bool:
        return True

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus

    async def stop(self) -> None:
        self._bus = None

    async def submit(self, text: str, *, sender_id: str = "user") -> None:
        """Hand a line typed at the terminal to the agent."""
        await self.accept(
            InboundMessage(channel=self.name, chat_id=self.chat_id, sender_id=sender_id, text=text)
        )

    async def send(self, msg: OutboundMessage) -> None:
        out = self.stream or sys.stdout
        try:
            out.write(msg.text.rstrip("\n") + "\n")
            out.flush()
        except (OSError, ValueError) as exc:
            raise ChannelError(f"could not write to the terminal: {exc}") from exc
