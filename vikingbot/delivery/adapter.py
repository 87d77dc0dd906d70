"""The delivery service as a turn's ``deliver`` part (the ``Deliver`` protocol of tools/base).

Every producer of a turn (heartbeat, cron, dashboard prompt, chat) hands the
agent loop a :class:`TurnDelivery`; the ``message`` tool sends through it and
nothing else. A target the agent chose is untrusted: it is resolved by the
delivery service (allow-list, owner fallback, audit of refusals, outbox, inbox).

What differs between producers is an option, not a class:

- where a text with no target goes: the ``sink`` (a terminal, a dashboard slot, a
  control-API client), else the turn's own ``chat`` (the chat the message came
  from; allowed in, so no allow-list check), else the default ``target`` (the
  entry's ``deliver:`` tag, the job's target, ``bot.heartbeat.target``, or a
  dashboard slot) resolved with the turn's ``sessions``;
- how its sends are keyed: ``<run_id>:<n>``, or with ``stable_keys`` (a heartbeat
  entry's run, ``heartbeat.turn.run_identity``) ``<run_id>:<text digest>:<count>``, so
  a run repeated after a crash does not send the same text twice; without a run id, a
  fresh key per send;
- ``fence``: awaited before every send; it raises when another gateway took the turn's
  unit over, so a late finisher delivers nothing;
- ``repeat_within_s``: a destination that had the same news that recently does not get
  it again.

``sends`` records what became of each send (:data:`~vikingbot.delivery.types.SendStatus`),
which the heartbeat's ``outcome.settle`` reads.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from vikingbot import telemetry
from vikingbot.tools.base import DeliveryStatus

if TYPE_CHECKING:
    from vikingbot.delivery.service import DeliveryService
    from vikingbot.delivery.types import SendStatus
    from vikingbot.session.types import SessionKey, SessionMeta

Sink = Callable[[str], Awaitable[DeliveryStatus]]
Fence = Callable[[str], Awaitable[None]]


class TurnDelivery:
    """``Deliver`` for one turn; records what became of each of its sends."""

    def __init__(
        self,
        service: DeliveryService,
        *,
        source: str,
        target: str | None = None,
        sessions: Sequence[SessionMeta] = (),
        chat: SessionKey | None = None,
        thread: str | None = None,
        sink: Sink | None = None,
        run_id: str | None = None,
        stable_keys: bool = False,
        fence: Fence | None = None,
        repeat_within_s: float = 0.0,
    ) -> None:
        self.service = service
        self.source = source
        self.target = target
        self.sessions = list(sessions)
        self.chat = chat
        self.thread = thread
        self.sink = sink
        self.run_id = run_id
        self.stable_keys = stable_keys
        self.fence = fence
        self.repeat_within_s = repeat_within_s
        self.attempts = 0
        self.sends: list[SendStatus] = []
        self._texts: dict[str, int] = {}

    @classmethod
    def for_chat(
        cls,
        service: DeliveryService,
        session: SessionKey,
        *,
        thread: str | None = None,
        run_id: str | None = None,
        sink: Sink | None = None,
    ) -> TurnDelivery:
        """A chat turn's: no target means this chat (or ``sink``), a target is resolved."""
        return cls(
            service, source=f"chat:{session}", chat=session, thread=thread, run_id=run_id, sink=sink
        )

    def _key(self, text: str, target: str | None) -> str | None:
        if self.run_id is None:
            return None
        if not self.stable_keys:
            return f"{self.run_id}:{self.attempts}"
        what = hashlib.sha256(f"{target or ''}\n{text}".encode()).hexdigest()[:16]
        seen = self._texts[what] = self._texts.get(what, 0) + 1
        return f"{self.run_id}:{what}:{seen}"

    async def __call__(self, text: str, target: str | None = None) -> DeliveryStatus:
        """Deliver ``text`` (to ``target``, else this turn's own destination), traced as
        ``deliver``."""
        if not telemetry.enabled():
            return await self._deliver(text, target)
        where = target or ("this chat" if self.sink or self.chat else self.target)
        attrs = {"vikingbot.delivery.target": str(where)[:200], "vikingbot.source": self.source}
        with telemetry.span("deliver", attrs) as sp:
            status = await self._deliver(text, target)
            sp.set("vikingbot.delivery.status", str(status))
            return status

    async def _deliver(self, text: str, target: str | None) -> DeliveryStatus:
        if self.fence is not None:
            await self.fence("deliver its result")
        self.attempts += 1
        key = self._key(text, target)
        if target is None and self.sink is not None:
            return self._record(await self.sink(text))
        if target is None and self.chat is not None:
            return self._record(
                await self.service.reply(self.chat, text, thread=self.thread, dedupe_key=key)
            )
        report = await self.service.deliver(
            text,
            target or self.target,
            sessions=self.sessions,
            dedupe_key=key or f"{self.source}:{uuid.uuid4().hex}",
            source=self.source,
            repeat_within_s=self.repeat_within_s,
        )
        if report.sent is not None:
            self.sends.append(report.sent)
        return report.status

    def _record(self, status: DeliveryStatus) -> DeliveryStatus:
        self.sends.append(status)
        return status
