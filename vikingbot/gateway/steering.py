"""Chats steer the gateway: commands answered without the model, approvals asked in the
chat, the typing indicator, and /stop, around each chat turn (``Dispatcher`` calls it).

``intercept`` answers a message that is a command (``vikingbot.commands``) or a plain
"yes"/"no" to an approval question waiting in that chat: nothing of it reaches the
model. ``run`` wraps a chat turn: it remembers the turn's task (``/stop`` cancels it),
sets the turn's asker (a tool the policy asks about is asked in the chat, answered by
the person the turn serves or the owner), applies the chat's ``/model``, keeps the
typing indicator alive and adds the turn's tokens and cost to the chat's usage.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.agent.approval import TURN_ASKER
from vikingbot.agent.streaming import TURN_STREAM
from vikingbot.channels.approval_ui import Question
from vikingbot.channels.base import PAIRING
from vikingbot.commands import Approvals, CommandCall, Desk, registry, yes_or_no
from vikingbot.commands import usage as usage_counts
from vikingbot.commands.builtin import chat_model
from vikingbot.delivery.owner import owner_chat_for
from vikingbot.errors import ChannelBusy, VikingbotError
from vikingbot.gateway.live_reply import LiveReply

if TYPE_CHECKING:
    from vikingbot.agent.dispatch import TurnText
    from vikingbot.bus import InboundMessage
    from vikingbot.channels.base import Channel
    from vikingbot.commands.types import HeartbeatControls
    from vikingbot.config.schema import Config
    from vikingbot.gateway.pairing_desk import PairingDesk
    from vikingbot.session.store import SessionStore
    from vikingbot.session.types import SessionKey

TYPING_EVERY_S = 4.0  # Telegram's indicator lasts 5 s; Matrix's is asked for 30 s
MAX_BUSY_WAIT_S = 10.0
Reply = Callable[[str], Awaitable[Any]]


class Steering:
    """The chat-side controls of one gateway (built by ``compose.dispatch``)."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        sessions: SessionStore,
        audit: Callable[..., None] | None,
        workspace_of: Callable[[SessionKey], str],
        channel_of: Callable[[str], Channel | None] | None = None,
    ) -> None:
        self.config = config
        self.sessions = sessions
        self.approvals = Approvals(audit)
        self.registry = registry()
        self.channel_of: Callable[[str], Channel | None] = channel_of or (lambda _name: None)
        self.heartbeat: HeartbeatControls | None = None  # set once the heartbeat runs
        self.pairing_desk: PairingDesk | None = None  # set where a config file is there
        self._audit = audit
        self._running: dict[SessionKey, asyncio.Task[Any]] = {}
        self._stopping: set[asyncio.Task[Any]] = set()
        self._order: dict[str, asyncio.Lock] = {}  # per chat: commands in arrival order
        self.workspace_of = workspace_of

    def desk(self) -> Desk:
        return Desk(
            config=self.config,
            sessions=self.sessions,
            approvals=self.approvals,
            registry=self.registry,
            stop_turn=self.stop_turn,
            workspace_of=self.workspace_of,
            heartbeat=self.heartbeat,
            pairing=None if self.pairing_desk is None else self.pairing_desk.as_text,
        )

    def is_owner(self, channel: str, sender: str, chat: str) -> bool:
        """The owner writes from the owner's chat on this channel (``bot.owner`` or the
        channel's ``owner_chat``), or is that chat's id (a Telegram user's own chat)."""
        owner = owner_chat_for(self.config(), channel)
        return owner is not None and owner in (sender, chat)

    def stop_turn(self, key: SessionKey) -> bool:
        task = self._running.get(key)
        if task is None or task.done():
            return False
        self._stopping.add(task)
        task.cancel()
        return True

    # ---- commands and answers ----------------------------------------------

    def _chat_lock(self, place: str) -> asyncio.Lock:
        if len(self._order) > 10_000:
            self._order = {p: lock for p, lock in self._order.items() if lock.locked()}
        return self._order.setdefault(place, asyncio.Lock())

    async def intercept(self, msg: InboundMessage, key: SessionKey, reply: Reply) -> bool:
        """Answer ``msg`` here when it is a command or an answer to a waiting question.

        Call it first thing for each message, in arrival order: a chat's commands are
        answered in order, and a chat turn begins after the commands sent before it.
        """
        async with self._chat_lock(f"{msg.channel}:{msg.chat_id}"):
            return await self._intercept(msg, key, reply)

    async def _intercept(self, msg: InboundMessage, key: SessionKey, reply: Reply) -> bool:
        if msg.metadata.get(PAIRING):  # a stranger: a code and nothing else, never the model
            if self.pairing_desk is not None:
                await self.pairing_desk.stranger(msg, reply)
            return True
        place = f"{msg.channel}:{msg.chat_id}"
        owner = self.is_owner(msg.channel, msg.sender_id, msg.chat_id)
        found = self.registry.find(msg.text)
        if found is None:
            yes = yes_or_no(msg.text)
            if yes is None or not self.approvals.waiting_in(place):
                return False
            await reply(self.approvals.answer(place, msg.sender_id, owner=owner, yes=yes))
            return True
        await reply(await self.command(msg, key, owner=owner))
        return True

    async def command(self, msg: InboundMessage, key: SessionKey, *, owner: bool) -> str:
        """The answer to ``msg``, a command (``registry.find`` knows it)."""
        found = self.registry.find(msg.text)
        assert found is not None
        command, inv = found
        if command.owner_only and not owner:
            self._record(msg, command.name, "refused", "owner only")
            return f"Only the owner can use /{command.name}."
        place = f"{msg.channel}:{msg.chat_id}"
        call = CommandCall(self.desk(), key, place, msg.sender_id, owner, inv.args)
        try:
            text = await command.handler(call)
        except VikingbotError as exc:
            text = f"/{command.name} failed: {exc}"
        self._record(msg, command.name, "done", None)
        return text

    def _record(self, msg: InboundMessage, name: str, outcome: str, reason: str | None) -> None:
        logger.info(
            "command /{} from {} in {}:{}: {}",
            name,
            msg.sender_id,
            msg.channel,
            msg.chat_id,
            outcome,
        )
        if self._audit is None or name not in ("heartbeat", "pair", "model", "new"):
            return
        with contextlib.suppress(VikingbotError, OSError):
            self._audit(
                f"chat:{msg.sender_id}"[:200],
                "command",
                f"/{name}",
                outcome,
                reason,
                {"channel": msg.channel, "chat_id": msg.chat_id},
            )

    # ---- around a chat turn ------------------------------------------------

    async def run(
        self,
        msg: InboundMessage,
        key: SessionKey,
        meta: dict[str, Any],
        turn: Callable[[dict[str, Any]], Awaitable[TurnText]],
    ) -> TurnText | None:
        """Run ``turn(meta)`` as this chat's turn; None when ``/stop`` ended it."""
        me = asyncio.current_task()
        assert me is not None
        stored = await asyncio.to_thread(self.sessions.get_or_create, key)
        model = chat_model(stored.metadata, self.config())
        if model is not None:
            meta = {**meta, "model": model}
        self._running[key] = me
        typing = asyncio.create_task(self._keep_typing(msg), name=f"typing:{key}")
        token = TURN_ASKER.set(self._asker(msg))  # None: nobody can be asked there
        live = self._live(msg)
        streaming = TURN_STREAM.set(live)
        try:
            out = await turn(meta)
        except asyncio.CancelledError:
            if me not in self._stopping:
                raise
            me.uncancel()
            logger.info("turn in {} stopped by /stop", key)
            return None
        finally:
            TURN_ASKER.reset(token)
            TURN_STREAM.reset(streaming)
            typing.cancel()
            if live is not None:
                await live.close()  # before the reply is delivered: it replaces the preview
            self._stopping.discard(me)
            if self._running.get(key) is me:
                del self._running[key]
        if out.result is not None:
            await self._count(key, out)
        return out

    def _live(self, msg: InboundMessage) -> LiveReply | None:
        """The turn's live reply, where the channel can edit and ``stream_replies`` is on."""
        channel = self.channel_of(msg.channel)
        if channel is None or channel.edit_every_s is None or not channel.config.stream_replies:
            return None
        return LiveReply(channel, msg.chat_id, msg.thread, channel.edit_every_s)

    async def _keep_typing(self, msg: InboundMessage) -> None:
        channel = self.channel_of(msg.channel)
        if channel is None or not channel.config.typing:
            return
        while True:
            try:
                await channel.typing(msg.chat_id, msg.thread)
            except VikingbotError as exc:  # only a hint: a failure never stops the turn
                logger.debug("typing in {}:{} failed: {}", msg.channel, msg.chat_id, exc)
                return
            await asyncio.sleep(TYPING_EVERY_S)

    def _asker(
        self, msg: InboundMessage
    ) -> Callable[[str, dict[str, Any]], Awaitable[bool]] | None:
        """The chat's asker, or None where nobody can be asked (no such channel running, or
        its ``ask_approvals`` is off): the policy's old rule, deny, then applies."""
        place = f"{msg.channel}:{msg.chat_id}"
        channel = self.channel_of(msg.channel)
        if channel is None or not channel.config.ask_approvals:
            return None
        timeout = channel.config.approval_timeout_s

        async def ask(tool: str, args: dict[str, Any]) -> bool:
            assert channel is not None
            pending = self.approvals.open(place, msg.sender_id, tool, args)
            question = Question(pending.id, tool, pending.preview, timeout)
            try:
                await self._show(channel, msg, question)
            except VikingbotError as exc:
                logger.warning("could not ask in {} about {}: {}", place, tool, exc)
                self.approvals.discard(pending)
                return False
            return await self.approvals.wait(pending, timeout)

        return ask

    @staticmethod
    async def _show(channel: Channel, msg: InboundMessage, question: Question) -> None:
        """Show the question; a platform asking us to slow down (429) is waited out once."""
        try:
            await channel.ask(msg.chat_id, msg.thread, question)
        except ChannelBusy as exc:
            await asyncio.sleep(min(MAX_BUSY_WAIT_S, exc.retry_after or 1.0))
            await channel.ask(msg.chat_id, msg.thread, question)

    async def _count(self, key: SessionKey, out: TurnText) -> None:
        r = out.result
        assert r is not None
        turn = {
            "requests": 1,
            "model_calls": r.model_calls,
            "tokens_in": r.tokens_in,
            "tokens_out": r.tokens_out,
            "cost_usd": r.cost_usd,
        }
        day = datetime.now(UTC).date().isoformat()

        def write() -> None:
            meta = self.sessions.get_or_create(key)
            counts = usage_counts.added(meta.metadata.get("usage"), day, turn)
            self.sessions.update_metadata(key, usage=counts, last_request=turn)

        try:
            await asyncio.to_thread(write)
        except (VikingbotError, OSError) as exc:
            logger.warning("could not count usage of {}: {}", key, exc)

    def terminal_asker(
        self, session: str, emit: Callable[[dict[str, Any]], bool]
    ) -> Callable[[str, dict[str, Any]], Awaitable[bool]]:
        """The asker of an attached ``vikingbot chat`` turn (issue 42): each question is an
        ``ask`` event on the turn's stream (``emit``; False: it could not be sent), answered
        through ``POST /api/v1/chat/answer``; no answer within the ``cli`` channel's
        ``approval_timeout_s`` denies."""
        from vikingbot.delivery.owner import channel_sections

        place = f"cli:{session}"

        async def ask(tool: str, args: dict[str, Any]) -> bool:
            section = channel_sections(self.config()).get("cli")
            timeout = section.approval_timeout_s if section is not None else 300.0
            pending = self.approvals.open(place, "cli", tool, args)
            event = {"event": "ask", "id": pending.id, "tool": tool, "preview": pending.preview}
            if not emit({**event, "timeout_s": timeout}):
                self.approvals.discard(pending)
                return False
            return await self.approvals.wait(pending, timeout)

        return ask

    def terminal_answer(self, session: str, ident: str, yes: bool) -> str:
        """The terminal's answer (the control API is the owner's: its secret was shown)."""
        return self.approvals.answer(f"cli:{session}", "cli", owner=True, yes=yes, ident=ident)

    async def register_menus(self, channels: Sequence[Channel]) -> None:
        """Put the commands in each channel's native menu (a failure is only logged)."""
        menu = self.registry.menu()
        for channel in channels:
            try:
                await channel.register_commands(menu)
            except VikingbotError as exc:
                logger.warning("channel {}: could not register commands: {}", channel.name, exc)
