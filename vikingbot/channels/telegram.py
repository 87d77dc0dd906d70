"""Telegram through python-telegram-bot: long polling in, ``sendMessage`` out.

Inbound: a background task calls ``getUpdates`` (long polling) and hands each
text message (or photo, voice note, audio or document, fetched with ``getFile`` only
once the sender passed) to the allow-list check; the offset advances past every update,
so a message is processed once while the gateway runs. An allowed sender's text
message is kept in the state database first (``channels/kept.py``) until answered,
so a gateway killed mid-turn answers it after its restart, completing the live
reply it had begun (``channels/drafts.py``). Forum topics become threads
(``message_thread_id``).

Outbound: ``sendMessage`` with ``message_thread_id`` for a thread. Errors from
the library are converted here: flood control becomes :class:`ChannelBusy`;
bad requests, blocked bots and bad tokens :class:`ChannelRejected`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from loguru import logger
from pydantic import SecretStr

from vikingbot.bus import Attachment, InboundMessage, MessageBus
from vikingbot.channels.base import Channel, Problems, has_secret
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelBusy, ChannelError, ChannelRejected, NotConfiguredError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from telegram import Bot, Update

    from vikingbot.channels.approval_ui import Question
    from vikingbot.channels.drafts import Drafts
    from vikingbot.channels.kept import KeptInbound

_INT = re.compile(r"-?\d{1,20}")
MAX_POLL_BACKOFF_S = 60.0


def _convert(exc: Exception, what: str) -> ChannelError:
    """A python-telegram-bot error as a :class:`ChannelError` naming what failed."""
    from telegram import error as tg

    text = f"Telegram {what} failed: {type(exc).__name__}: {exc}"
    if isinstance(exc, tg.RetryAfter):
        delay = getattr(exc, "_retry_after", None)
        return ChannelBusy(text, delay.total_seconds() if delay is not None else None)
    if isinstance(exc, tg.BadRequest | tg.Forbidden | tg.InvalidToken | tg.ChatMigrated):
        return ChannelRejected(text)
    if isinstance(exc, tg.EndPointNotFound):
        return ChannelRejected(text)
    return ChannelError(text)


def _chat(chat_id: str) -> int | str:
    return int(chat_id) if _INT.fullmatch(chat_id) else chat_id


class TelegramSettings(ChannelBase):
    """``bot.channels.telegram``: the common channel keys plus these."""

    token: SecretStr | None = None  # from @BotFather
    api_base: str | None = None


class TelegramChannel(Channel):
    name: ClassVar[str] = "telegram"
    edit_every_s: ClassVar[float | None] = 1.0  # Telegram: about one edit a second per chat
    settings: ClassVar[type[ChannelBase]] = TelegramSettings

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, TelegramSettings)
        return Problems([] if has_secret(section.token) else ["token"], [])

    max_message_chars: ClassVar[int | None] = 4000  # Telegram allows 4096 UTF-16 units
    poll_timeout_s: ClassVar[int] = 25
    exclusive_inbound: ClassVar[bool] = True  # Telegram allows one getUpdates consumer

    def __init__(self, config: TelegramSettings, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.telegram: TelegramSettings = config
        self._bot: Bot | None = None
        self._poller: asyncio.Task[None] | None = None
        self._offset: int | None = None  # next getUpdates offset (past handled updates)
        self.bot_username: str | None = None
        self._drafts: dict[tuple[str, str | None], int] = {}  # live replies: message ids
        self.kept: KeptInbound | None = None  # accepted text messages, until answered
        self.previews: Drafts | None = None  # the live replies' ids, across a crash
        if self._store is not None:
            from vikingbot.channels.drafts import Drafts
            from vikingbot.channels.kept import KeptInbound

            self.kept = KeptInbound(self.name, self._store, self._clock, self.gateway)
            if config.stream_replies:
                self.previews = Drafts(self.name, self._store, self._clock)

    def _make_bot(self) -> Bot:
        from telegram import Bot
        from telegram.request import HTTPXRequest

        token = self.telegram.token
        if token is None or not token.get_secret_value():
            raise NotConfiguredError("Telegram needs bot.channels.telegram.token (from @BotFather)")
        kwargs: dict[str, Any] = {
            "request": HTTPXRequest(connection_pool_size=4),
            "get_updates_request": HTTPXRequest(connection_pool_size=1),
        }
        if self.telegram.api_base:
            kwargs["base_url"] = self.telegram.api_base.rstrip("/") + "/bot"
            kwargs["base_file_url"] = self.telegram.api_base.rstrip("/") + "/file/bot"
        return Bot(token.get_secret_value(), **kwargs)

    async def start(self, bus: MessageBus) -> None:
        from telegram.error import TelegramError

        self._bus = bus
        bot = self._make_bot()
        try:
            await bot.initialize()
        except TelegramError as exc:
            await bot.shutdown()
            raise _convert(exc, "getMe") from exc
        self._bot = bot
        self.bot_username = bot.username
        if self.kept is not None:
            self.kept.start(bus)
        if not self.defer_receiving:
            await self.start_receiving()

    async def start_receiving(self) -> None:
        if self._bot is None or self._poller is not None:
            return
        from vikingbot.channels import position

        stored = await position.stored(self._store, self.name)
        if stored is not None and (self._offset is None or stored > self._offset):
            self._offset = stored  # where the gateway that polled before us stopped
        self._poller = asyncio.create_task(self._poll(self._bot), name="telegram-poll")
        logger.info("telegram: polling as @{}", self.bot_username)

    async def stop_receiving(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
            logger.info("telegram: stopped polling")

    @property
    def receiving(self) -> bool:
        return self._poller is not None and not self._poller.done()

    async def stop(self) -> None:
        await self.stop_receiving()
        if self.kept is not None:
            await self.kept.stop()
        bot, self._bot = self._bot, None
        if bot is not None:
            try:
                await bot.shutdown()
            except Exception as exc:
                logger.warning("telegram: shutting down the client failed: {}", exc)

    async def _poll(self, bot: Bot) -> None:
        from telegram.error import Conflict, Forbidden, InvalidToken, TelegramError

        from vikingbot.channels import position

        # The offset lives on the channel and in the database (``channel_offsets``):
        # polling stopped and started again, here or on another gateway sharing the
        # database (a failover), neither fetches a handled update again nor skips one.
        backoff = 1.0
        while True:
            try:
                updates = await bot.get_updates(
                    offset=self._offset,
                    timeout=self.poll_timeout_s,
                    allowed_updates=["message", "callback_query"],
                )
                backoff = 1.0
                if self.loop_error is not None:
                    self.report_loop(None)  # polling works again: /health ok
            except (InvalidToken, Forbidden) as exc:
                self.last_error = f"getUpdates: {exc}"
                self.running = False
                logger.error("telegram: polling stopped: {}", exc)
                return
            except TelegramError as exc:
                self.report_loop(f"getUpdates: {exc}")  # /health: degraded while it fails
                hint = " (is another copy of the bot polling?)" if isinstance(exc, Conflict) else ""
                logger.warning(
                    "telegram: getUpdates failed: {}{}; retrying in {}s", exc, hint, backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_POLL_BACKOFF_S)
                continue
            except Exception as exc:  # supervisor boundary: keep polling
                self.last_error = f"getUpdates: {exc}"
                logger.exception("telegram: unexpected polling error; retrying in {}s", backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_POLL_BACKOFF_S)
                continue
            for update in updates:
                self._offset = update.update_id + 1
                msg = self.inbound_from_update(update)
                if msg is not None:
                    msg = await self._keep(msg)
                else:
                    msg = await self._pressed(bot, update)
                if msg is not None:
                    await self.accept(msg)
                await position.advance(self._store, self.name, self._offset, self._clock.now())

    async def _keep(self, msg: InboundMessage) -> InboundMessage:
        """An allowed sender's text message written down before the offset moves past it,
        so a gateway killed mid-turn answers it after its restart (``channels/kept.py``).
        A message with files is not kept (the files are fetched from the update), nor a
        stranger's (it must never reach the model unchecked)."""
        from vikingbot.errors import StoreError

        if self.kept is None or msg.attachments or not self.allowed(msg.sender_id, msg.chat_id):
            return msg
        try:
            return await self.kept.keep(msg)
        except StoreError as exc:
            logger.warning("telegram: message not kept (answered all the same): {}", exc)
            return msg

    async def answering(self, msg: InboundMessage) -> None:
        if self.kept is not None:
            await self.kept.answering(msg)

    async def answered(self, msg: InboundMessage) -> None:
        if self.kept is not None:
            await self.kept.answered(msg)

    def inbound_from_update(self, update: Update) -> InboundMessage | None:
        """An ``InboundMessage`` for a person's message (text, or a photo, voice note,
        audio or document with its caption), None for anything else."""
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return None
        attachments = self._attachments(message)
        text = message.text or message.caption or ""
        if not text and not attachments:
            return None
        thread = message.message_thread_id if message.is_topic_message else None
        return InboundMessage(
            channel=self.name,
            chat_id=str(message.chat.id),
            sender_id=str(message.from_user.id),
            text=text,
            thread=str(thread) if thread is not None else None,
            metadata={"message_id": message.message_id, "chat_type": message.chat.type},
            attachments=attachments,
        )

    def _attachments(self, message: Any) -> tuple[Attachment, ...]:
        """The files of ``message``, downloaded (``getFile``) only when taken in."""
        n = message.message_id
        if message.photo:
            size = message.photo[-1]  # the largest of the sizes Telegram made
            return (self._file(size.file_id, f"photo-{n}.jpg", size.file_size, "image"),)
        if message.voice:
            v = message.voice
            return (self._file(v.file_id, f"voice-{n}.ogg", v.file_size, "audio"),)
        if message.audio:
            a = message.audio
            name = a.file_name or f"audio-{n}"
            return (self._file(a.file_id, name, a.file_size, "audio", a.mime_type),)
        if message.document:
            d = message.document
            name = d.file_name or f"file-{n}"
            return (self._file(d.file_id, name, d.file_size, None, d.mime_type),)
        return ()

    def _file(
        self,
        file_id: str,
        name: str,
        size: int | None,
        kind: Literal["image", "audio"] | None,
        mime: str | None = None,
    ) -> Attachment:
        """A file of a message (the length of audio is measured once downloaded: PTB's
        ``duration`` is changing type)."""

        async def fetch(limit: int) -> bytes:
            from telegram.error import TelegramError

            if self._bot is None:
                raise ChannelError("Telegram channel is not started")
            try:
                found = await self._bot.get_file(file_id)
                return bytes(await found.download_as_bytearray())
            except TelegramError as exc:
                raise _convert(exc, f"download of {name}") from exc

        return Attachment(name, fetch, mime=mime, size=size, kind=kind)

    async def send(self, msg: OutboundMessage) -> None:
        from telegram.error import TelegramError

        if self._bot is None:
            raise ChannelError("Telegram channel is not started")
        thread: int | None = None
        if msg.thread is not None:
            if not _INT.fullmatch(msg.thread):
                raise ChannelRejected(f"Telegram thread id must be a number, got {msg.thread!r}")
            thread = int(msg.thread)
        from telegram.error import BadRequest

        from vikingbot.channels.markup import to_telegram_html

        chat = _chat(msg.chat_id)
        if await self._finish_draft(msg, chat):
            return
        try:
            try:
                await self._bot.send_message(
                    chat_id=chat,
                    text=to_telegram_html(msg.text),
                    parse_mode="HTML",
                    message_thread_id=thread,
                )
            except BadRequest as exc:
                why = str(exc).lower()
                if "parse entities" not in why and "too long" not in why:
                    raise
                # Our HTML is always well formed and the piece is within the limit as
                # written; should Telegram still refuse the formatted text, the words
                # matter more than the formatting.
                logger.warning("telegram: formatted text refused ({}); sending it plain", exc)
                await self._bot.send_message(chat_id=chat, text=msg.text, message_thread_id=thread)
        except TelegramError as exc:
            raise _convert(exc, f"sendMessage to {msg.chat_id}") from exc

    # ---- chat-side capabilities (channels/approval_ui.py, gateway/steering.py) -----

    async def _pressed(self, bot: Bot, update: Update) -> InboundMessage | None:
        """A pressed approval button: the command it stands for, from the person who pressed
        it (then checked like typed text). The press is acknowledged either way."""
        from telegram.error import TelegramError

        from vikingbot.commands.registry import parse

        query = update.callback_query
        if query is None:
            return None
        with contextlib.suppress(TelegramError):
            await bot.answer_callback_query(query.id)
        data = query.data if isinstance(query.data, str) else ""
        inv = parse(data)
        message = query.message
        if inv is None or inv.name not in ("approve", "deny") or message is None:
            return None
        thread = getattr(message, "message_thread_id", None)
        topic = bool(getattr(message, "is_topic_message", False))
        return InboundMessage(
            channel=self.name,
            chat_id=str(message.chat.id),
            sender_id=str(query.from_user.id),
            text=f"/{inv.name} {' '.join(inv.args)}".strip(),
            thread=str(thread) if thread is not None and topic else None,
            metadata={"callback_query": query.id},
        )

    async def ask(self, chat_id: str, thread: str | None, question: Question) -> None:
        """The question with Allow / Deny buttons (an inline keyboard)."""
        from telegram import InlineKeyboardButton, InlineKeyboardMarkup
        from telegram.error import TelegramError

        from vikingbot.channels.approval_ui import button_form

        if self._bot is None:
            raise ChannelError("Telegram channel is not started")
        keys = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton("Allow", callback_data=question.approve),
                    InlineKeyboardButton("Deny", callback_data=question.deny),
                ]
            ]
        )
        try:
            await self._bot.send_message(
                chat_id=_chat(chat_id),
                text=button_form(question),
                message_thread_id=int(thread) if thread and _INT.fullmatch(thread) else None,
                reply_markup=keys,
            )
        except TelegramError as exc:
            raise _convert(exc, f"sendMessage (approval) to {chat_id}") from exc

    async def typing(self, chat_id: str, thread: str | None) -> None:
        from telegram.constants import ChatAction
        from telegram.error import TelegramError

        if self._bot is None:
            return
        try:
            await self._bot.send_chat_action(
                chat_id=_chat(chat_id),
                action=ChatAction.TYPING,
                message_thread_id=int(thread) if thread and _INT.fullmatch(thread) else None,
            )
        except TelegramError as exc:
            raise _convert(exc, f"sendChatAction to {chat_id}") from exc

    async def register_commands(self, menu: Sequence[tuple[str, str]]) -> None:
        """``setMyCommands``: the commands in Telegram's "/" menu."""
        from telegram import BotCommand
        from telegram.error import TelegramError

        if self._bot is None:
            return
        try:
            await self._bot.set_my_commands([BotCommand(n, d) for n, d in menu])
        except TelegramError as exc:
            raise _convert(exc, "setMyCommands") from exc

    async def draft(self, chat_id: str, thread: str | None, text: str) -> None:
        """The reply so far: posted once (plain text), then ``editMessageText``."""
        from telegram.error import BadRequest, TelegramError

        if self._bot is None:
            raise ChannelError("Telegram channel is not started")
        key = (chat_id, thread)
        chat = _chat(chat_id)
        try:
            mid = self._drafts.get(key)
            if mid is None and self.previews is not None:  # one a killed run left: resume it
                mid = await self.previews.left(chat_id, thread)
                if mid is not None:
                    self._drafts[key] = mid
            if mid is None:
                sent = await self._bot.send_message(
                    chat_id=chat,
                    text=text,
                    message_thread_id=int(thread) if thread and _INT.fullmatch(thread) else None,
                )
                self._drafts[key] = sent.message_id
                if self.previews is not None:
                    await self.previews.posted(chat_id, thread, sent.message_id)
            else:
                await self._bot.edit_message_text(text, chat_id=chat, message_id=mid)
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                raise _convert(exc, f"live reply in {chat_id}") from exc
        except TelegramError as exc:
            raise _convert(exc, f"live reply in {chat_id}") from exc

    async def _finish_draft(self, msg: OutboundMessage, chat: int | str) -> bool:
        """The reply's first piece replaces the chat's live draft (True: done here)."""
        from telegram.error import TelegramError

        from vikingbot.channels.markup import to_telegram_html

        mid = self._drafts.pop((msg.chat_id, msg.thread), None)
        if mid is None and self.previews is not None:  # a killed run's preview: complete it
            mid = await self.previews.left(msg.chat_id, msg.thread)
        if mid is None or self._bot is None:
            return False
        if self.previews is not None:
            await self.previews.done(msg.chat_id, msg.thread)
        try:
            await self._bot.edit_message_text(
                to_telegram_html(msg.text), chat_id=chat, message_id=mid, parse_mode="HTML"
            )
        except TelegramError as exc:  # the draft is gone or refused: send the reply anew
            logger.info("telegram: could not finish the live reply ({}); sending it", exc)
            return False
        return True
