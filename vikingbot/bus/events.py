"""What channels hand the agent: ``InboundMessage``, queued on the bus. (The text for a
person that delivery sends, ``OutboundMessage``, lives in ``vikingbot.delivery.types``.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class InboundMessage:
    """A message from a person on a chat platform (already allow-listed)."""

    channel: str  # channel kind: slack, telegram, webhook, cli
    chat_id: str
    sender_id: str
    text: str
    thread: str | None = None
    channel_id: str = "default"
    received_at: datetime = field(default_factory=_now)
    metadata: dict[str, Any] = field(default_factory=dict)
