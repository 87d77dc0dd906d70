"""A scripted agent loop and a recording outbound handler, for cron and claim tests.

``ScriptedAgent`` is an ``AgentLoop`` whose reply (or error, or hang) the test
sets; it records every turn. ``Sent`` stands where the channels would be: it
records what delivery sent, or refuses everything with ``fail = True``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from vikingbot.agent.types import TurnResult
from vikingbot.delivery.service import Outgoing
from vikingbot.delivery.types import OutboundMessage
from vikingbot.session.types import SessionKey
from vikingbot.tools.base import Deliver

START = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@dataclass
class ScriptedAgent:
    """An AgentLoop whose replies are set by the test; records every turn."""

    reply: str | None = "Done: 3 new mails."
    error: Exception | None = None
    hang: bool = False
    turns: list[tuple[str, SessionKey, dict[str, Any]]] = field(default_factory=list)

    async def run_turn(
        self,
        prompt: str,
        session_key: SessionKey,
        metadata: dict[str, Any] | None = None,
        *,
        deliver: Deliver | None = None,
    ) -> TurnResult:
        self.turns.append((prompt, session_key, dict(metadata or {})))
        if self.hang:
            await asyncio.Event().wait()
        if self.error is not None:
            raise self.error
        return TurnResult(text=self.reply, model_calls=1)


@dataclass
class Sent:
    """The platform side of delivery (its sink): records what delivery sent (or refuses it)."""

    messages: list[OutboundMessage] = field(default_factory=list)
    fail: bool = False

    async def __call__(self, item: Outgoing) -> bool:
        if self.fail:
            return False
        self.messages.append(item.message)
        return True

    @property
    def chats(self) -> list[tuple[str, str, str]]:
        """(channel:chat, text, source) of every message sent."""
        return [
            (f"{m.channel}:{m.chat_id}", m.text, str(m.metadata.get("source")))
            for m in self.messages
        ]
