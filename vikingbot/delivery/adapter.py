"""The delivery service as a turn's ``deliver`` part (the ``Deliver`` protocol of tools/base).

Every producer of a turn (heartbeat, cron, dashboard prompt, chat) hands the
agent loop one of these; the ``message`` tool sends through it and nothing else.
A target the agent chose is untrusted: it is resolved by the delivery service
(allow-list, owner fallback, audit of refusals, outbox, inbox).

- :class:`TurnDelivery`: a background turn. No target means the turn's default
  (the entry's ``deliver:`` tag, the job's target, ``bot.heartbeat.target``, or a
  dashboard slot); each call gets the dedupe key ``<run_id>:<n>``.
- :class:`ChatDelivery`: a chat turn. No target means "reply in this chat" (the
  chat the message came from; allowed in, so no allow-list check); a target is
  resolved like any other.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from vikingbot.tools.base import DeliveryStatus

if TYPE_CHECKING:
    from vikingbot.delivery.service import DeliveryService
    from vikingbot.delivery.types import DeliveryReport
    from vikingbot.session.types import SessionKey, SessionMeta


class TurnDelivery:
    """``Deliver`` for one background turn; counts what became of its messages."""

    def __init__(
        self,
        service: DeliveryService,
        *,
        default_target: str | None,
        run_id: str,
        source: str,
        sessions: Sequence[SessionMeta] = (),
    ) -> None:
        self.service = service
        self.default_target = default_target
        self.run_id = run_id
        self.source = source
        self.sessions = list(sessions)
        self.attempts = 0
        self.delivered = 0
        self.inboxed = 0
        self.silenced = 0
        self.reports: list[DeliveryReport] = []

    async def __call__(self, text: str, target: str | None = None) -> DeliveryStatus:
        self.attempts += 1
        report = await self.service.deliver(
            text,
            target or self.default_target,
            sessions=self.sessions,
            dedupe_key=f"{self.run_id}:{self.attempts}",
            source=self.source,
        )
        self.reports.append(report)
        if report.skipped == "silent":
            self.silenced += 1
            return "delivered"  # the user asked for silence: nothing is owed
        status = report.status
        if status == "delivered":
            self.delivered += 1
        elif status == "inboxed":
            self.inboxed += 1
        return status

    @property
    def outcome(self) -> DeliveryStatus | None:
        """``delivered`` if any message reached a channel, ``inboxed`` if only the inbox
        has them, ``failed`` if one was lost, None when nothing was sent."""
        if self.delivered:
            return "delivered"
        if self.inboxed:
            return "inboxed"
        if any(r.status == "failed" for r in self.reports):
            return "failed"
        return None


class ChatDelivery:
    """``Deliver`` for a chat turn: replies in its own chat, anything else resolved."""

    def __init__(
        self,
        service: DeliveryService,
        *,
        session: SessionKey,
        thread: str | None = None,
        run_id: str | None = None,
        sink: Callable[[str], Awaitable[DeliveryStatus]] | None = None,
    ) -> None:
        self.service = service
        self.session = session
        self.thread = thread
        self.run_id = run_id
        self.sink = sink  # where own-chat replies go instead (a control-API client)
        self.attempts = 0

    async def __call__(self, text: str, target: str | None = None) -> DeliveryStatus:
        self.attempts += 1
        key = f"{self.run_id}:{self.attempts}" if self.run_id else None
        if target is None and self.sink is not None:
            return await self.sink(text)
        if target is None:
            return await self.service.reply(self.session, text, thread=self.thread, dedupe_key=key)
        report = await self.service.deliver(
            text,
            target,
            sessions=(),
            dedupe_key=key or f"chat:{self.session}:{uuid.uuid4().hex}",
            source=f"chat:{self.session}",
        )
        return report.status
