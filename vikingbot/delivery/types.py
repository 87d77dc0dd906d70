"""Delivery data types: a concrete destination, a resolution, a report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from vikingbot.session.types import SessionKey
from vikingbot.tools.base import DeliveryStatus

DestinationKind = Literal["chat", "inbox", "prompt"]

SendStatus = Literal["delivered", "inboxed", "failed", "silent", "refused", "repeat"]
"""What became of one send, for the heartbeat's ledger: a :data:`DeliveryStatus`, or
``silent`` (the target says so), ``refused`` (the target was refused; the owner got it)
or ``repeat`` (every destination had this news within the repeat window)."""


@dataclass(frozen=True)
class Destination:
    """One place a result goes: a chat on a channel, an inbox slot, or a prompt slot.

    ``session`` is the chat's session when the destination came from one
    (``last`` / ``all``); the delivered text is recorded there. An inbox destination
    that stands for a terminal chat (the ``cli`` channel) keeps that chat's session too.
    """

    kind: DestinationKind
    channel: str | None = None
    chat_id: str | None = None
    thread: str | None = None
    channel_id: str = "default"
    slot: str | None = None
    session: SessionKey | None = None

    @classmethod
    def chat(
        cls,
        channel: str,
        chat_id: str,
        thread: str | None = None,
        *,
        channel_id: str = "default",
        session: SessionKey | None = None,
    ) -> Destination:
        return cls("chat", channel, chat_id, thread, channel_id, session=session)

    @classmethod
    def inbox(cls, slot: str) -> Destination:
        return cls("inbox", slot=slot)

    @classmethod
    def prompt(cls, slot: str) -> Destination:
        return cls("prompt", slot=slot)

    @property
    def session_key(self) -> SessionKey | None:
        """The session whose history records a chat delivery."""
        if self.kind != "chat" or self.channel is None or self.chat_id is None:
            return None
        return self.session or SessionKey(self.channel, self.channel_id, self.chat_id)

    def __str__(self) -> str:
        if self.kind == "chat":
            text = f"{self.channel}:{self.chat_id}"
            return f"{text}:{self.thread}" if self.thread else text
        if self.kind == "inbox":
            return f"dashboard:{self.slot}"
        return f"prompt:dashboard:{self.slot}"


@dataclass
class Resolution:
    """Where a target resolves to now. No destinations and not refused means silent."""

    target: str
    destinations: list[Destination] = field(default_factory=list)
    refused: str | None = None  # why the asked-for target was refused (then: owner)
    note: str | None = None  # a fallback that is not a refusal (e.g. "no owner: inbox")

    @property
    def silent(self) -> bool:
        return not self.destinations


@dataclass
class DeliveryReport:
    """What became of one result."""

    target: str
    text: str  # the text as delivered (tokens stripped)
    delivered: list[str] = field(default_factory=list)  # destinations that took it
    failed: list[str] = field(default_factory=list)  # chat destinations that did not
    inboxed: list[str] = field(default_factory=list)  # inbox / prompt slots written
    refused: str | None = None
    # "empty" (nothing left after stripping), "silent", or "repeat" (every destination
    # had this news within the repeat window)
    skipped: str | None = None
    repeated: list[str] = field(default_factory=list)  # destinations that had it already

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def status(self) -> DeliveryStatus:
        """``delivered`` when a channel took it, ``inboxed`` when only the inbox has it,
        ``failed`` when it is nowhere (a silent or empty result counts as delivered:
        nothing was meant to go out)."""
        kept = set(self.inboxed)
        if any(d not in kept for d in self.delivered):
            return "delivered"
        if self.inboxed:
            return "inboxed"
        if self.skipped is not None:
            return "delivered"
        return "failed"

    @property
    def sent(self) -> SendStatus | None:
        """What became of it, with the skips and a refusal told apart (:data:`SendStatus`);
        None when nothing was left to send (the text was empty after the tokens)."""
        if self.skipped == "empty":
            return None
        if self.skipped == "silent":
            return "silent"
        if self.skipped == "repeat":
            return "repeat"
        if self.refused and self.status != "failed":
            return "refused"
        return self.status


@dataclass(frozen=True)
class OutboundMessage:
    """Text for a person. ``channel``/``chat_id``/``thread`` are already resolved.

    ``dedupe_key`` makes delivery idempotent: the outbox sends a given key once.
    """

    channel: str
    chat_id: str
    text: str
    thread: str | None = None
    channel_id: str = "default"
    dedupe_key: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
