"""What channels hand the agent: ``InboundMessage``, queued on the bus. (The text for a
person that delivery sends, ``OutboundMessage``, lives in ``vikingbot.delivery.types``.)"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal


def _now() -> datetime:
    return datetime.now(UTC)


AttachmentKind = Literal["image", "audio", "document"]


@dataclass(frozen=True)
class Attachment:
    """A file a person sent, not downloaded yet (``vikingbot.media`` takes it in).

    ``fetch(limit)`` is the platform's download (the channel's own code): it returns
    the bytes, or raises ``ValueError``/``OSError``/a channel error naming what failed,
    and may refuse as soon as more than ``limit`` bytes arrive. ``size`` and
    ``duration_s`` are what the platform declares (checked again after download);
    ``kind`` is the platform's word for it (a voice note is ``audio``), else None
    (told from the name, type and bytes).
    """

    name: str
    fetch: Callable[[int], Awaitable[bytes]] = field(repr=False, compare=False)
    mime: str | None = None
    size: int | None = None
    kind: AttachmentKind | None = None
    duration_s: float | None = None


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
    # files sent with it: fetched only after the sender passed the allow list
    attachments: tuple[Attachment, ...] = ()
