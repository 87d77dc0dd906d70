"""What every channel is: start, stop, send, and who may talk to the bot.

A channel turns a chat platform into bus events. Inbound messages pass
:meth:`Channel.accept`, which lets through only allow-listed senders and audits
everyone else; outbound text arrives already split to ``max_message_chars`` and
is sent by :meth:`Channel.send`, which raises :class:`ChannelError` (never a
vendor SDK error) when the platform did not take it.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from loguru import logger
from pydantic import SecretStr

from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.clock import Clock, SystemClock
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelError, VikingbotError

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from vikingbot.channels.approval_ui import Question
    from vikingbot.store.db import StateStore

STRANGER_AUDIT_EVERY = timedelta(minutes=10)

Spawn = Callable[[str, Callable[[], Awaitable[Any]]], "asyncio.Task[Any]"]
"""``spawn(name, factory)``: run a background loop (the gateway supervises it)."""


def plain_spawn(name: str, factory: Callable[[], Awaitable[Any]]) -> asyncio.Task[Any]:
    """A background loop as a plain task (no gateway: it is not restarted)."""

    async def run() -> Any:
        return await factory()

    return asyncio.create_task(run(), name=name)


TellOwner = Callable[[str, str], Awaitable[Any]]
"""``tell_owner(key, text)``: tell the owner once per key (the gateway's notifier)."""


async def log_only(key: str, text: str) -> None:
    """No gateway to tell the owner through: the notice goes to the log."""
    logger.warning("for the owner ({}): {}", key, text)


def has_secret(value: SecretStr | None) -> bool:
    """A secret setting that is present and not empty."""
    return value is not None and bool(value.get_secret_value())


PAIRING = "pairing"  # InboundMessage.metadata key: a stranger asking for a pairing code


def stranger(msg: InboundMessage) -> InboundMessage:
    """What the gateway sees of a stranger's message where pairing is on: who and where,
    never the text (commands/pairing.py answers it with a code)."""
    return InboundMessage(
        channel=msg.channel,
        chat_id=msg.chat_id,
        sender_id=msg.sender_id,
        text="",
        thread=msg.thread,
        channel_id=msg.channel_id,
        metadata={PAIRING: True},
    )


class ReceiveLoop:
    """A channel's receive loop (a long poll, a websocket, an event stream), run through
    the channel's ``spawn`` (in a gateway it is supervised): started once, and on stop
    cancelled and waited for. Channels with ``exclusive_inbound`` start it in
    ``start_receiving`` and stop it in ``stop_receiving``."""

    def __init__(self, channel: Channel, run: Callable[[], Awaitable[Any]]) -> None:
        self._channel = channel
        self._run = run
        self._task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        if self._task is None:  # ``spawn`` is read now: the manager sets it after __init__
            self._task = self._channel.spawn(f"channel:{self._channel.name}", self._run)

    async def stop(self) -> bool:
        """Cancel the loop and wait for it to end; False when none was running."""
        task, self._task = self._task, None
        if task is None:
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(task, return_exceptions=True)
        return True

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()


class Problems(NamedTuple):
    """What a channel's section lacks: ``missing`` settings stop it sending at all;
    ``notes`` describe reduced function (e.g. can send, cannot receive)."""

    missing: list[str]
    notes: list[str]


class Channel(ABC):
    """Base class of every channel plugin (entry-point group ``vikingbot.channels``).

    A channel brings everything about itself: its ``settings`` model (the
    ``bot.channels.<name>`` section, validated through it), :meth:`problems` (what
    the section lacks, for ``vikingbot channels status``) and :meth:`routes` (HTTP
    routes the gateway mounts under ``/<name>/``). Adding a channel is this class
    and its entry point; see docs/architecture.md.

    ``owner_chat`` is the owner's chat id on this channel (from ``bot.owner`` or
    the channel's ``owner_chat``), or None. ``gateway`` is the id of the gateway
    running it (the ``gateways`` registry), or None outside a gateway.

    ``spawn`` runs the channel's own background loops (a receive loop): in a gateway
    the manager hands it the supervisor's, so a loop that raises is logged, told to
    the owner once, shown in ``/health`` and started again with backoff.
    """

    name: ClassVar[str] = ""
    #: The model of this channel's config section (a ``ChannelBase`` subclass).
    settings: ClassVar[type[ChannelBase]] = ChannelBase
    #: Longest text one platform message may carry; None means no limit.
    max_message_chars: ClassVar[int | None] = 4000
    #: Only one process may receive at a time (Telegram long polling, Slack Socket
    #: Mode). With several gateways on one database the channel manager sets
    #: ``defer_receiving`` before ``start``; ``channels/leadership.py`` then calls
    #: ``start_receiving``/``stop_receiving`` on the gateway holding the channel's lease.
    exclusive_inbound: ClassVar[bool] = False
    #: The platform drops a repeat of a piece sent with the same ``dedupe_key`` (Matrix's
    #: transaction id): a piece in doubt after a crash is simply sent again.
    idempotent_send: ClassVar[bool] = False
    #: Nobody writes in it (push notifications): its chats never go quiet, results reach
    #: them when they are a target (`heartbeat plan` says so instead of "stale").
    outbound_only: ClassVar[bool] = False

    def __init__(
        self,
        config: ChannelBase,
        *,
        owner_chat: str | None = None,
        store: StateStore | None = None,
        clock: Clock | None = None,
        gateway: str | None = None,
    ) -> None:
        self.config = config
        self.gateway = gateway
        self.owner_chat = owner_chat
        self._store = store
        self._clock: Clock = clock or SystemClock()
        self._bus: MessageBus | None = None
        self._strangers_seen: dict[tuple[str, str], datetime] = {}
        self.running = False
        self.last_error: str | None = None
        self.defer_receiving = False
        self.spawn: Spawn = plain_spawn
        #: the manager hands the gateway's notifier here (``tell_owner(key, text)``)
        self.tell_owner: TellOwner = log_only
        #: why the channel's receive loop keeps failing (None: it works); ``/health``
        #: shows the channel ``degraded`` while it is set (see :meth:`report_loop`)
        self.loop_error: str | None = None

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        """What ``section`` lacks, from the config alone (no network). Default: nothing."""
        return Problems([], [])

    @classmethod
    async def check_credentials(cls, section: ChannelBase) -> str | None:
        """Ask the platform whether ``section``'s credentials work (``doctor --live``):
        a line saying who the bot is there, or None when this channel cannot ask.
        Raise :class:`ChannelError` naming what failed when they do not work."""
        return None

    def routes(self) -> Sequence[BaseRoute]:
        """HTTP routes for the gateway, relative to ``/<name>`` (e.g. ``/inbound``).

        They are mounted at ``/<name>/...`` and bypass the gateway token: each
        route must check its own credentials. Default: none.
        """
        return ()

    @abstractmethod
    async def start(self, bus: MessageBus) -> None:
        """Connect to the platform and begin handing inbound messages to ``bus``."""

    @abstractmethod
    async def stop(self) -> None:
        """Disconnect; safe to call when not started."""

    async def start_receiving(self) -> None:
        """Begin handing inbound messages to the bus (channels with ``exclusive_inbound``)."""
        return None

    async def stop_receiving(self) -> None:
        """Stop receiving but stay able to send; safe to call when not receiving."""
        return None

    @property
    def receiving(self) -> bool:
        """Whether this process is receiving this channel's messages right now."""
        return self.running and not self.exclusive_inbound

    @abstractmethod
    async def send(self, msg: OutboundMessage) -> None:
        """Send one piece of text (already split); raise :class:`ChannelError` on failure."""

    async def arrived(self, msg: OutboundMessage, *, since: datetime) -> bool | None:
        """Whether ``msg`` (a piece keyed ``msg.dedupe_key``, first sent after ``since``)
        is already in its chat, or None when the channel cannot tell (the default).

        Asked only for a piece whose sender died while sending it; a channel that
        can look (its platform keeps the key with the message) spares the chat a
        repeat. False or None: the piece is sent again.
        """
        return None

    async def answering(self, msg: InboundMessage) -> None:
        """A turn on ``msg`` begins (a channel that keeps messages counts the tries).
        Default: nothing to do."""
        return None

    async def answered(self, msg: InboundMessage) -> None:
        """The reply to ``msg`` was handed to delivery (a channel that keeps accepted
        messages until answered marks it here). Default: nothing to do."""
        return None

    # ---- chat-side capabilities: each has a working default (text, or nothing) -----

    async def ask(self, chat_id: str, thread: str | None, question: Question) -> None:
        """Show an approval question in a chat (``channels/approval_ui.py``). Default: its
        text form, answered by a reply; a platform with buttons overrides this."""
        from vikingbot.channels.approval_ui import text_form

        await self.send(OutboundMessage(self.name, chat_id, text_form(question), thread=thread))

    #: Live replies (``draft``): the least seconds between two edits of one message, as
    #: the platform's limits allow; None: this channel cannot show a reply while written.
    edit_every_s: ClassVar[float | None] = None

    async def draft(self, chat_id: str, thread: str | None, text: str) -> None:
        """Show ``text``, the reply so far, in one message: the first call posts it, later
        calls edit it, and the turn's final :meth:`send` to the chat replaces it (so the
        final text is exactly the reply, sent through the outbox). Default: nothing."""
        return None

    async def typing(self, chat_id: str, thread: str | None) -> None:
        """Show "typing…" in a chat for a few seconds (called again while a turn runs).
        Default: nothing."""
        return None

    async def register_commands(self, menu: Sequence[tuple[str, str]]) -> None:
        """Register the chat commands (``(name, summary)``) in the platform's native menu.
        Default: nothing (the typed ``/name`` works everywhere)."""
        return None

    def allowed(self, sender_id: str, chat_id: str) -> bool:
        """May this sender, in this chat, talk to the bot?

        ``allow_from`` lists sender ids and/or chat ids. An empty list lets only
        the owner's chat in; ``"*"`` lets everyone in. The owner's chat is
        always allowed.
        """
        allow = self.config.allow_from
        if "*" in allow:
            return True
        if self.owner_chat is not None and chat_id == self.owner_chat:
            return True
        return sender_id in allow or chat_id in allow

    async def accept(self, msg: InboundMessage) -> bool:
        """Publish an inbound message if its sender is allowed; otherwise ignore and audit."""
        if not self.allowed(msg.sender_id, msg.chat_id):
            if self.config.pairing and self._bus is not None:  # a code, and nothing else
                await self._bus.publish_inbound(stranger(msg))
                return False
            if self._should_audit(msg):
                await asyncio.to_thread(self._audit_refusal, msg)
            return False
        if self._bus is None:
            raise ChannelError(f"channel {self.name!r} received a message before start()")
        await self._bus.publish_inbound(msg)
        return True

    def report_loop(self, error: str | None) -> None:
        """A receive loop that handles its own failures says so here: ``error`` while it
        keeps failing (``/health``: degraded, naming the channel), None once it works."""
        if error is not None or self.last_error == self.loop_error:
            self.last_error = error
        self.loop_error = error

    async def refuse(self, msg: InboundMessage, reason: str) -> None:
        """Refuse ``msg`` (from an allowed sender id, but not believed): logged and audited
        with ``reason`` (one audit record per sender and chat per window)."""
        logger.info(
            "channel {}: refused a message from {} in chat {}: {}",
            self.name,
            msg.sender_id,
            msg.chat_id,
            reason,
        )
        if self._should_audit(msg, quiet=True):
            await asyncio.to_thread(self._audit_refusal, msg, reason)

    def _should_audit(self, msg: InboundMessage, *, quiet: bool = False) -> bool:
        """Log every refusal; audit one sender in one chat at most once per window."""
        if not quiet:
            logger.info(
                "channel {}: ignored a message from {} in chat {} (not in allow_from)",
                self.name,
                msg.sender_id,
                msg.chat_id,
            )
        now = self._clock.now()
        who = (msg.sender_id, msg.chat_id)
        last = self._strangers_seen.get(who)
        if last is not None and now - last < STRANGER_AUDIT_EVERY:
            return False
        if len(self._strangers_seen) >= 10_000:
            self._strangers_seen.clear()
        self._strangers_seen[who] = now
        return self._store is not None

    def _audit_refusal(self, msg: InboundMessage, reason: str = "sender not in allow_from") -> None:
        if self._store is None:
            return
        try:
            self._store.audit(
                f"channel:{self.name}",
                "inbound.refuse",
                msg.sender_id,
                "ignored",
                reason=reason,
                details={"chat_id": msg.chat_id, "thread": msg.thread, "chars": len(msg.text)},
            )
        except VikingbotError:
            logger.exception("channel {}: could not write the audit record", self.name)
