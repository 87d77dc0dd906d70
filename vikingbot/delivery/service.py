"""Delivery: where a heartbeat or cron result goes, and getting it there once.

:meth:`DeliveryService.resolve` turns a target (a ``deliver:`` tag, or
``bot.heartbeat.target``) into concrete destinations. Targets are untrusted: a
malformed one, one on a channel that is not enabled, or a chat that is neither
on the channel's ``allow_from`` nor the owner's is refused, and the owner gets
the result instead. :meth:`DeliveryService.deliver` strips the heartbeat tokens,
sends to the connected sink (the channel manager's outbox makes it exactly-once per
``dedupe_key``), audits refusals, records what was delivered in the chat's
history, and puts anything that could not be delivered into the inbox, so a
result is never lost silently.

The terminal is no place to push to: a chat on the ``cli`` channel (`vikingbot
chat`'s session, chosen by ``last``/``all``, as the owner, or named as a target)
resolves to the owner's inbox, where an attached `vikingbot chat` prints it as it
arrives; the outcome is ``inboxed``, never ``delivered`` onto a process's stdout
nobody reads. A result for a terminal session is still written into that
session's history, as a chat delivery is.

The one outbound path: a message leaves for a chat only as an :class:`Outgoing`,
which only this module can make (its constructor wants the module's private
seal), handed to the sink the gateway connects (the channel manager's
``send``, which refuses anything else). Nothing else in the process can put a
message on a channel, so every message is resolved, checked and audited here.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Final

from loguru import logger

from vikingbot.clock import Clock, SystemClock
from vikingbot.config.schema import Config
from vikingbot.delivery.inbox import Inbox, InboxKind
from vikingbot.delivery.news import news_form
from vikingbot.delivery.outbox import SENT, Outbox
from vikingbot.delivery.owner import channel_sections, enabled_channels, owner_chat_for, owner_of
from vikingbot.delivery.targets import DEFAULT_SLOT, Target, parse_target
from vikingbot.delivery.types import DeliveryReport, Destination, OutboundMessage, Resolution
from vikingbot.errors import DeliveryError, SessionError, StoreError
from vikingbot.replies import strip_tokens
from vikingbot.session.types import Message, SessionKey, SessionMeta
from vikingbot.tools.base import DeliveryStatus

if TYPE_CHECKING:
    from vikingbot.session.store import SessionStore
    from vikingbot.store.db import StateStore

MAX_KEY_CHARS = 200
TERMINAL = "cli"  # `vikingbot chat`'s channel: its chats are the owner's inbox
INBOX_CHANNEL = "dashboard"  # outbox rows that record inbox deliveries (never re-sent)
_SEAL: Final = object()  # only this module holds it: only DeliveryService makes an Outgoing


class Outgoing:
    """A message the delivery service resolved and checked, ready for a channel.

    Made only by :class:`DeliveryService` (the constructor refuses any other
    caller's seal); the channel manager sends nothing else. ``source`` says which
    producer it came from (``heartbeat``, ``cron:<job>``, ``chat-reply``...).
    """

    __slots__ = ("message", "source")

    def __init__(self, message: OutboundMessage, *, source: str, seal: object) -> None:
        if seal is not _SEAL:
            raise TypeError(
                "an Outgoing message is made only by vikingbot.delivery.service.DeliveryService"
            )
        self.message: Final = message
        self.source: Final = source

    def __repr__(self) -> str:
        msg = self.message
        return f"Outgoing({msg.channel}:{msg.chat_id}, key={msg.dedupe_key!r}, from {self.source})"


Sink = Callable[[Outgoing], Awaitable[bool]]
"""Where resolved messages go: the channel manager's ``send`` (True: a platform took it)."""


def destination_for_session(meta: SessionMeta) -> Destination:
    """The chat a session lives in. A ``chat_id`` of ``CHAT:THREAD`` is a thread."""
    chat, _, thread = meta.key.chat_id.partition(":")
    return Destination.chat(
        meta.key.type, chat, thread or None, channel_id=meta.key.channel_id, session=meta.key
    )


def _history_metadata(source: str, dest: Destination) -> dict[str, str]:
    """Outbound metadata: where the result came from and the session that records it.

    Kept with the outbox row, so a message re-sent after a crash is still
    recorded in the right chat's history (:meth:`DeliveryService.record_resent`).
    """
    key = dest.session_key
    return {"source": source, "session": str(key)} if key is not None else {"source": source}


def _terminal_to_inbox(dests: Sequence[Destination]) -> list[Destination]:
    """Chats on the terminal channel as the inbox's default slot (keeping the session, whose
    history records the result); each inbox slot once however many terminal chats lead to it.
    Other destinations stay as they are (``str`` of a chat leaves out its account, so two
    accounts' chats may print alike)."""
    out: list[Destination] = []
    slots: set[str] = set()
    for dest in dests:
        if dest.kind == "chat" and dest.channel == TERMINAL:
            dest = Destination("inbox", slot=DEFAULT_SLOT, session=dest.session_key)
        if dest.kind == "inbox":
            if str(dest) in slots:
                continue
            slots.add(str(dest))
        out.append(dest)
    return out


def dedupe_key_for(base: str, dest: Destination, *, several: bool) -> str:
    """The outbox key of one destination of a run (the run's key when it is the only one)."""
    if len(base) > MAX_KEY_CHARS - 24:
        base = "h:" + hashlib.sha256(base.encode()).hexdigest()[:48]
    if not several:
        return base
    return f"{base}>{hashlib.sha256(str(dest).encode()).hexdigest()[:16]}"


def own_chat_message(
    session: SessionKey, text: str, *, thread: str | None, dedupe_key: str | None
) -> OutboundMessage:
    """The reply to a chat's own conversation (the session's chat)."""
    return OutboundMessage(
        channel=session.type,
        chat_id=session.chat_id,
        text=text,
        thread=thread,
        channel_id=session.channel_id,
        dedupe_key=dedupe_key,
        # no "session": the agent loop already wrote this reply into the chat's history
        metadata={"source": "chat-reply"},
    )


class DeliveryService:
    def __init__(
        self,
        config: Config,
        *,
        store: StateStore,
        sessions: SessionStore,
        clock: Clock | None = None,
        sink: Sink | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.sessions = sessions
        self.clock: Clock = clock or SystemClock()
        self.inbox = Inbox(store, self.clock)
        self.outbox = Outbox(store, self.clock)
        self._sink = sink

    def connect(self, sink: Sink | None) -> None:
        """Send resolved messages to ``sink`` (the gateway's channel manager; None: nowhere,
        so results go to the inbox)."""
        self._sink = sink

    async def _send(self, msg: OutboundMessage, source: str) -> bool:
        """Hand one resolved message to the sink; False when there is none or it failed."""
        if self._sink is None:
            logger.info("delivery: no channels here; {}:{} not sent", msg.channel, msg.chat_id)
            return False
        return await self._sink(Outgoing(msg, source=source, seal=_SEAL))

    # ---- resolving (no I/O) ---------------------------------------------

    def owner(self) -> Destination | None:
        owner = owner_of(self.config)
        return Destination.chat(owner.channel, owner.chat_id, owner.thread) if owner else None

    def _eligible(self, sessions: Sequence[SessionMeta]) -> list[SessionMeta]:
        enabled = set(enabled_channels(self.config))
        return [s for s in sessions if s.key.type in enabled]

    def _last(self, sessions: Sequence[SessionMeta]) -> Destination | None:
        active = [s for s in self._eligible(sessions) if s.last_user_at is not None]
        if not active:
            return None
        newest = max(active, key=lambda s: (s.last_user_at, str(s.key)))
        return destination_for_session(newest)

    def _owner_or_last(self, res: Resolution, sessions: Sequence[SessionMeta]) -> Resolution:
        """The owner; else the most recently active session; else the inbox (warned)."""
        owner = self.owner()
        if owner is not None:
            res.destinations = [owner]
            return res
        last = self._last(sessions)
        if last is not None:
            res.destinations = [last]
            res.note = "no owner configured: sent to the most recently active chat"
            return res
        res.destinations = [Destination.inbox(DEFAULT_SLOT)]
        res.note = "no owner configured and no active chat: kept in the inbox"
        # the documented default for a home with no chat platform: not a problem
        logger.info("delivery: {} (target {!r})", res.note, res.target)
        return res

    def _refuse(self, res: Resolution, reason: str, sessions: Sequence[SessionMeta]) -> Resolution:
        res.refused = reason
        return self._owner_or_last(res, sessions)

    def resolve(self, target: str | None, *, sessions: Sequence[SessionMeta] = ()) -> Resolution:
        """Concrete destinations for ``target`` (None: ``bot.heartbeat.target``).

        ``sessions`` are the eligible sessions ``last`` and ``all`` choose from. A
        terminal chat becomes the inbox (see the module docstring).
        """
        res = self._resolve(target, sessions)
        res.destinations = _terminal_to_inbox(res.destinations)
        return res

    def _resolve(self, target: str | None, sessions: Sequence[SessionMeta]) -> Resolution:
        text = self.config.bot.heartbeat.target if target is None else target
        res = Resolution(target=text if isinstance(text, str) else repr(text))
        try:
            parsed = parse_target(text, known_channels=channel_sections(self.config))
        except DeliveryError as exc:
            return self._refuse(res, f"malformed target: {exc}", sessions)

        if parsed.kind == "none":
            return res
        if parsed.kind == "dashboard":
            res.destinations = [Destination.inbox(parsed.slot or DEFAULT_SLOT)]
            return res
        if parsed.kind == "prompt":
            res.destinations = [Destination.prompt(parsed.slot or DEFAULT_SLOT)]
            return res
        if parsed.kind == "owner":
            return self._owner_or_last(res, sessions)
        if parsed.kind == "last":
            last = self._last(sessions)
            if last is not None:
                res.destinations = [last]
                return res
            res.note = "no active chat for 'last'"
            return self._owner_or_last(res, sessions)
        if parsed.kind == "all":
            res.destinations = [destination_for_session(s) for s in self._eligible(sessions)]
            if not res.destinations:
                res.note = "no eligible chat for 'all'"
                return self._owner_or_last(res, sessions)
            return res
        return self._resolve_channel(res, parsed, sessions)

    def _resolve_channel(
        self, res: Resolution, parsed: Target, sessions: Sequence[SessionMeta]
    ) -> Resolution:
        channel = parsed.channel or ""
        section = channel_sections(self.config)[channel]
        if not section.enabled:
            return self._refuse(res, f"channel {channel!r} is not enabled", sessions)
        if channel == TERMINAL:  # the owner's own terminal: any chat there is the inbox
            res.destinations = [Destination.inbox(DEFAULT_SLOT)]
            return res
        owner_chat = owner_chat_for(self.config, channel)
        if parsed.chat_id is None:
            if owner_chat is None:
                res.note = f"no owner chat on {channel!r}"
                return self._owner_or_last(res, sessions)
            owner = self.owner()
            thread = owner.thread if owner and owner.channel == channel else None
            res.destinations = [Destination.chat(channel, owner_chat, thread)]
            return res
        if parsed.chat_id != owner_chat and parsed.chat_id not in section.allow_from:
            reason = (
                f"chat {parsed.chat_id!r} is not on {channel}.allow_from and is not the owner's"
            )
            return self._refuse(res, reason, sessions)
        res.destinations = [Destination.chat(channel, parsed.chat_id, parsed.thread)]
        return res

    # ---- delivering -----------------------------------------------------

    async def deliver(
        self,
        text: str | None,
        target: str | None,
        *,
        sessions: Sequence[SessionMeta] = (),
        dedupe_key: str,
        source: str,
        repeat_within_s: float = 0.0,
    ) -> DeliveryReport:
        """Deliver one result; see the module docstring. Never raises for a bad target.

        ``repeat_within_s``: a destination that got the same news (``news_form``) that
        recently does not get it again (``report.repeated``; all of them: ``skipped``
        is ``"repeat"``)."""
        clean = strip_tokens(text or "")
        res = self.resolve(target, sessions=sessions)
        report = DeliveryReport(target=res.target, text=clean, refused=res.refused)
        if not clean:
            report.skipped = "empty"
            return report
        if res.refused:
            await asyncio.to_thread(self._audit_refusal, res, source)
        if res.silent:
            report.skipped = "silent"
            logger.info("delivery: {} result not sent (target {!r})", source, res.target)
            return report
        several = len(res.destinations) > 1
        for dest in res.destinations:
            key = dedupe_key_for(dedupe_key, dest, several=several)
            if await asyncio.to_thread(self._already_sent, key):
                logger.debug("delivery: {} already went to {}; not again", key, dest)
                report.delivered.append(str(dest))
                if dest.kind != "chat":
                    report.inboxed.append(str(dest))
            elif repeat_within_s > 0 and await asyncio.to_thread(
                self._had_news, dest, clean, repeat_within_s
            ):
                report.repeated.append(str(dest))
            elif dest.kind == "chat":
                await self._to_chat(dest, clean, source, key, report)
            else:
                await asyncio.to_thread(self._to_inbox, dest, clean, source, key)
                report.delivered.append(str(dest))
                report.inboxed.append(str(dest))
                await self._record(dest.session, clean, source)  # a terminal session's
        if report.repeated and not (report.delivered or report.failed or report.inboxed):
            report.skipped = "repeat"
            logger.info(
                "delivery: {} result already went to {} within {:g} s; not again",
                source,
                ", ".join(report.repeated),
                repeat_within_s,
            )
        return report

    def _had_news(self, dest: Destination, text: str, within_s: float) -> bool:
        """Did ``dest`` get this news (compared as ``news_form``) within ``within_s``?"""
        if dest.kind == "chat":
            where = (dest.channel or "", dest.chat_id or "")
        elif dest.kind == "inbox":
            where = (INBOX_CHANNEL, dest.slot or DEFAULT_SLOT)
        else:  # a prompt starts a turn: the user's own request each time
            return False
        since = self.clock.now() - timedelta(seconds=within_s)
        news = news_form(text)
        return any(news_form(t) == news for t in self.outbox.texts_since(*where, since))

    async def reply(
        self, session: SessionKey, text: str, *, thread: str | None, dedupe_key: str | None
    ) -> DeliveryStatus:
        """Answer a chat in its own conversation (the chat the turn came from).

        The chat sent the message in, so it passed the channel's allow-list; no
        target resolution is needed. When no channel takes it (no gateway, the
        channel down) the text is kept in the inbox.
        """
        clean = strip_tokens(text or "")
        if not clean:
            return "delivered"
        msg = own_chat_message(session, clean, thread=thread, dedupe_key=dedupe_key)
        if await self._send(msg, "chat-reply"):
            return "delivered"
        try:
            await asyncio.to_thread(
                self.inbox.add,
                DEFAULT_SLOT,
                clean,
                source=f"chat:{session} (not delivered to {msg.channel}:{msg.chat_id})",
            )
        except StoreError:
            logger.exception("delivery: a reply for {} could not be kept", session)
            return "failed"
        return "inboxed"

    def _already_sent(self, key: str) -> bool:
        row = self.outbox.get(key)
        return row is not None and row.status == SENT

    def _to_inbox(self, dest: Destination, text: str, source: str, key: str) -> None:
        """Put a dashboard/prompt result in the inbox, once per key (tracked in the outbox)."""
        slot = dest.slot or DEFAULT_SLOT
        kind: InboxKind = "prompt" if dest.kind == "prompt" else "message"
        self.outbox.claim(OutboundMessage(INBOX_CHANNEL, slot, text, metadata={"kind": kind}), key)
        self.inbox.add(slot, text, source=source, kind=kind)
        self.outbox.mark_sent(key)

    async def _to_chat(
        self, dest: Destination, text: str, source: str, key: str, report: DeliveryReport
    ) -> None:
        msg = OutboundMessage(
            channel=dest.channel or "",
            chat_id=dest.chat_id or "",
            text=text,
            thread=dest.thread,
            channel_id=dest.channel_id,
            dedupe_key=key,
            metadata=_history_metadata(source, dest),
        )
        if await self._send(msg, source):
            report.delivered.append(str(dest))
            await self._record(dest.session_key, text, source)
            return
        report.failed.append(str(dest))
        logger.warning("delivery: {} could not be sent to {}; kept in the inbox", source, dest)
        try:
            await asyncio.to_thread(
                self.inbox.add, DEFAULT_SLOT, text, source=f"{source} (not delivered to {dest})"
            )
            report.inboxed.append(f"dashboard:{DEFAULT_SLOT}")
        except StoreError:
            logger.exception("delivery: the undelivered result from {} could not be kept", source)

    async def record_resent(self, msg: OutboundMessage) -> None:
        """Record a result the channel manager re-sent after a restart in its chat's history.

        :meth:`deliver` records a result once the platform took it; when the
        process died before that, the outbox re-sends the message on the next
        start and this records it then (the session is in the message's
        metadata). Messages that did not come from :meth:`deliver` (a chat
        reply the agent already wrote into history) carry no session and are
        left alone.
        """
        source, session = msg.metadata.get("source"), msg.metadata.get("session")
        if not isinstance(source, str) or not isinstance(session, str):
            return
        try:
            key = SessionKey.parse(session)
        except SessionError as exc:
            logger.warning("delivery: re-sent {}, but not recorded: {}", msg.dedupe_key, exc)
            return
        await self._record(key, msg.text, source)

    async def _record(self, key: SessionKey | None, text: str, source: str) -> None:
        """Write the delivered text into the chat's history (bookkeeping: not fresh)."""
        if key is None:
            return
        message = Message(
            role="assistant",
            content=text,
            timestamp=self.clock.now(),
            metadata={"delivered_from": source, "bookkeeping": True},
        )
        try:
            await asyncio.to_thread(self.sessions.append, key, message)
        except SessionError as exc:
            logger.warning("delivery: delivered, but not recorded in {}: {}", key, exc)

    def _audit_refusal(self, res: Resolution, source: str) -> None:
        fallback = [str(d) for d in res.destinations]
        logger.warning(
            "delivery: target {!r} refused ({}); sending to {}", res.target, res.refused, fallback
        )
        try:
            self.store.audit(
                source,
                "delivery.refuse",
                res.target,
                "refused",
                reason=res.refused,
                details={"fallback": fallback},
            )
        except StoreError:
            logger.exception("delivery: could not audit the refused target {!r}", res.target)
