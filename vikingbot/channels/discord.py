"""Discord through discord.py: the gateway websocket in, ``POST /channels/{id}/messages`` out.

A plug-in in all but location: its settings model is here (:class:`DiscordSettings`,
section ``bot.channels.discord``) and one entry point registers it (docs/extending.md).

Inbound: the gateway session (run through ``Channel.spawn``: in a gateway it is
supervised, so a lost connection is retried, shows in ``/health`` and is told to the
owner once; discord.py resumes a dropped session itself). A person's message passes
the allow-list (the author's user id or the channel id); in a server channel only a
message that mentions the bot is taken unless ``group_messages`` is ``all`` (which
needs the privileged MESSAGE CONTENT intent); a DM always. Bots are never answered.
The gateway does not replay what was said while no session was open: such messages
are not answered (docs/channels.md).

Outbound: Discord renders Markdown itself; images become links and mentions never
ping (``allowed_mentions`` is empty: an agent cannot ``@everyone``). The message
``nonce`` is derived from the piece's outbox key and sent with ``enforce_nonce``, so
a piece sent again after a crash returns the message Discord already created.

Live replies (``stream_replies``): :meth:`DiscordChannel.draft` posts the reply so far
once and then edits it (``PATCH /channels/{id}/messages/{id}``), at most one edit every
:attr:`DiscordChannel.edit_every_s` (Discord allows about 5 messages in 5 s per
channel); the turn's final :meth:`send` edits the same message to the reply. A preview
that cannot be edited any more (deleted: 404) gets the reply posted anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from loguru import logger
from pydantic import SecretStr

from vikingbot.bus import Attachment, InboundMessage, MessageBus
from vikingbot.channels.base import Channel, Problems, ReceiveLoop, has_secret
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelBusy, ChannelError, ChannelRejected, NotConfiguredError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import discord

    from vikingbot.channels.approval_ui import Question

SNOWFLAKE = re.compile(r"[0-9]{1,20}")
COMMAND_NAME = re.compile(r"[a-z0-9_-]{1,32}")  # what Discord takes as a slash command name
IMAGE = re.compile(r"!\[([^\]\n]*)\]\(([^)\s]+)\)")
MAX_RATELIMIT_WAIT_S = 30.0  # longer 429s are ChannelBusy (discord.py's smallest bound)


class DiscordSettings(ChannelBase):
    """``bot.channels.discord``: the common channel keys plus these."""

    token: SecretStr | None = None  # the bot token (Developer Portal → Bot)
    group_messages: Literal["mentions", "all"] = "mentions"
    api_base: str | None = None  # only for a proxy or a test server
    send_timeout_s: float = 60.0


def nonce(key: str) -> str:
    """The message nonce for an outbox piece (Discord allows 25 characters)."""
    return "vb" + hashlib.sha256(key.encode()).hexdigest()[:23]


def channel_problem(chat_id: str) -> str | None:
    """Why ``chat_id`` cannot be a Discord channel id (a snowflake), or None."""
    if SNOWFLAKE.fullmatch(chat_id) is None:
        return f"a Discord target is a channel id (digits), not {chat_id[:80]!r}"
    return None


def to_discord_markdown(markdown: str) -> str:
    """Markdown as Discord shows it: images (which a bot message cannot embed) as links."""
    return IMAGE.sub(lambda m: f"[{m.group(1) or m.group(2)}]({m.group(2)})", markdown)


def strip_mention(text: str, bot_id: int) -> str:
    """The message without a leading ``<@bot>`` / ``<@!bot>`` address."""
    for prefix in (f"<@{bot_id}>", f"<@!{bot_id}>"):
        if text.startswith(prefix):
            rest = text[len(prefix) :].lstrip(" :,")
            return rest or text
    return text


def _convert(exc: BaseException, what: str) -> ChannelError:
    """A discord.py / transport error as a :class:`ChannelError` naming what failed."""
    import discord

    if isinstance(exc, discord.RateLimited):
        return ChannelBusy(f"Discord {what}: rate limited", retry_after=exc.retry_after)
    if isinstance(exc, discord.LoginFailure):
        return ChannelRejected(f"Discord {what} failed: the bot token was refused ({exc})")
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return ChannelRejected(
            f"Discord {what} failed: enable the MESSAGE CONTENT intent for the bot "
            "(Developer Portal → Bot) or set group_messages to mentions"
        )
    if isinstance(exc, discord.HTTPException):
        text = f"Discord {what} failed: HTTP {exc.status} (code {exc.code}): {exc.text}"
        if exc.status == 429:
            return ChannelBusy(text)
        if exc.status in (400, 401, 403, 404, 413):
            return ChannelRejected(text)
        return ChannelError(text)
    if isinstance(exc, discord.ConnectionClosed) and exc.code == 4004:
        return ChannelRejected(f"Discord {what} failed: the gateway refused the token")
    return ChannelError(f"Discord {what} failed: {type(exc).__name__}: {exc}")


def _sdk_errors() -> tuple[type[BaseException], ...]:
    import aiohttp
    import discord

    return (discord.DiscordException, aiohttp.ClientError, asyncio.TimeoutError, OSError)


def _attachment(item: discord.Attachment) -> Attachment:
    """A file of a message, read from Discord's CDN only when taken in."""

    async def fetch(limit: int) -> bytes:
        if item.size > limit:
            raise ValueError(f"{item.filename} is over the {limit}-byte limit for a file")
        try:
            return await item.read()
        except _sdk_errors() as exc:
            raise _convert(exc, f"download of {item.filename}") from exc

    kind: Literal["audio"] | None = "audio" if item.is_voice_message() else None
    return Attachment(item.filename, fetch, mime=item.content_type, size=item.size, kind=kind)


def _client(section: DiscordSettings) -> discord.AutoShardedClient:
    import discord
    from discord.http import Route

    if not has_secret(section.token):
        raise NotConfiguredError("Discord needs bot.channels.discord.token (the bot token)")
    if section.api_base:
        # discord.py has one API base per process: so has a gateway (one bot account).
        Route.BASE = section.api_base.rstrip("/")
    intents = discord.Intents.none()
    intents.guilds = intents.guild_messages = intents.dm_messages = True
    intents.message_content = section.group_messages == "all"
    # AutoShardedClient takes its gateway URL from GET /gateway/bot, as Discord asks.
    return discord.AutoShardedClient(
        intents=intents, max_ratelimit_timeout=MAX_RATELIMIT_WAIT_S, chunk_guilds_at_startup=False
    )


def _token(section: DiscordSettings) -> str:
    assert section.token is not None
    return section.token.get_secret_value()


class DiscordChannel(Channel):
    name: ClassVar[str] = "discord"
    settings: ClassVar[type[ChannelBase]] = DiscordSettings
    max_message_chars: ClassVar[int | None] = 2000  # Discord's content limit
    exclusive_inbound: ClassVar[bool] = True  # one gateway session per bot answers
    idempotent_send: ClassVar[bool] = True  # nonce + enforce_nonce: a repeat is the same message
    edit_every_s: ClassVar[float | None] = 1.5  # under Discord's 5 messages / 5 s a channel

    def __init__(self, config: ChannelBase, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        assert isinstance(config, DiscordSettings)
        self.discord = config
        self._client: discord.AutoShardedClient | None = None
        self._loop = ReceiveLoop(self, self._receive)
        self.bot_id = 0
        self._drafts: dict[tuple[str, str | None], int] = {}  # live replies: message ids

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, DiscordSettings)
        return Problems([] if has_secret(section.token) else ["token"], [])

    @classmethod
    async def check_credentials(cls, section: ChannelBase) -> str | None:
        assert isinstance(section, DiscordSettings)
        client = _client(section)
        try:
            await client.login(_token(section))
            user = client.user
        except _sdk_errors() as exc:
            raise _convert(exc, "sign-in") from exc
        finally:
            await client.close()
        return f"signed in as {user} (id {user.id if user else '?'})"

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus
        client = _client(self.discord)
        try:
            await client.login(_token(self.discord))
        except _sdk_errors() as exc:
            await client.close()
            raise _convert(exc, "sign-in") from exc
        assert client.user is not None
        self._client, self.bot_id = client, client.user.id
        client.event(self.on_message)  # discord.py calls it by this name
        client.event(self.on_interaction)  # a pressed approval button
        logger.info("discord: signed in as {} ({})", client.user, self.bot_id)
        if not self.defer_receiving:
            await self.start_receiving()

    async def start_receiving(self) -> None:
        if self._client is not None:
            self._loop.start()

    async def stop_receiving(self) -> None:
        if not await self._loop.stop():
            return
        client = self._client
        if client is not None:
            for shard in client.shards.values():
                with contextlib.suppress(*_sdk_errors()):
                    await shard.disconnect()

    @property
    def receiving(self) -> bool:
        return self._loop.running

    async def stop(self) -> None:
        await self.stop_receiving()
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # ---- inbound ---------------------------------------------------------

    async def _receive(self) -> None:
        """Hold the gateway session until cancelled; raise :class:`ChannelError` when it
        ends (the supervisor opens a new one after a pause)."""
        client = self._client
        if client is None:
            return
        try:
            await client.connect(reconnect=True)
        except _sdk_errors() as exc:
            error = _convert(exc, "gateway")
            self.last_error = str(error)
            raise error from exc
        raise ChannelError("Discord gateway session ended")

    async def on_message(self, message: discord.Message) -> None:
        """discord.py's ``on_message``: a person's message, addressed to the bot, is a turn."""
        author = message.author
        if author.bot or author.id == self.bot_id:
            return
        if not message.content.strip() and not message.attachments:
            return
        self.last_error = None
        dm = message.guild is None and getattr(message, "guild_id", None) is None
        mentioned = any(user.id == self.bot_id for user in message.mentions)
        if not (dm or mentioned or self.discord.group_messages == "all"):
            return
        await self.accept(
            InboundMessage(
                channel=self.name,
                chat_id=str(message.channel.id),
                sender_id=str(author.id),
                text=strip_mention(message.content, self.bot_id),
                metadata={"message_id": str(message.id), "mentioned": mentioned, "dm": dm},
                attachments=tuple(_attachment(a) for a in message.attachments[:20]),
            )
        )

    # ---- outbound --------------------------------------------------------

    async def send(self, msg: OutboundMessage) -> None:
        import discord
        from discord.http import handle_message_parameters

        if self._client is None:
            raise ChannelError("Discord channel is not started")
        problem = channel_problem(msg.chat_id)
        if problem is not None:
            raise ChannelRejected(problem)
        if await self._finish_draft(msg):
            return
        params = handle_message_parameters(
            content=to_discord_markdown(msg.text),
            nonce=nonce(msg.dedupe_key) if msg.dedupe_key else None,
            allowed_mentions=discord.AllowedMentions.none(),
        )
        try:
            with params:
                async with asyncio.timeout(self.discord.send_timeout_s):  # not wait_for (3.11)
                    await self._client.http.send_message(int(msg.chat_id), params=params)
        except _sdk_errors() as exc:
            raise _convert(exc, f"send to {msg.chat_id}") from exc

    # ---- chat-side capabilities (channels/approval_ui.py, gateway/steering.py) -----

    async def draft(self, chat_id: str, thread: str | None, text: str) -> None:
        """The reply so far: posted once, then edited in place."""
        import discord
        from discord.http import handle_message_parameters

        if self._client is None:
            raise ChannelError("Discord channel is not started")
        problem = channel_problem(chat_id)
        if problem is not None:
            raise ChannelRejected(problem)
        key = (chat_id, thread)
        mid = self._drafts.get(key)
        params = handle_message_parameters(
            content=text, allowed_mentions=discord.AllowedMentions.none()
        )
        try:
            with params:
                async with asyncio.timeout(self.discord.send_timeout_s):
                    if mid is None:
                        sent = await self._client.http.send_message(int(chat_id), params=params)
                        self._drafts[key] = int(sent["id"])
                    else:
                        await self._client.http.edit_message(int(chat_id), mid, params=params)
        except _sdk_errors() as exc:
            raise _convert(exc, f"live reply in {chat_id}") from exc

    async def _finish_draft(self, msg: OutboundMessage) -> bool:
        """The reply's first piece replaces the chat's live preview (True: done here)."""
        import discord
        from discord.http import handle_message_parameters

        key = (msg.chat_id, msg.thread)
        mid = self._drafts.get(key)
        if mid is None or self._client is None:
            return False
        params = handle_message_parameters(
            content=to_discord_markdown(msg.text), allowed_mentions=discord.AllowedMentions.none()
        )
        try:
            with params:
                async with asyncio.timeout(self.discord.send_timeout_s):
                    await self._client.http.edit_message(int(msg.chat_id), mid, params=params)
        except discord.NotFound as exc:  # the preview was deleted: send the reply anew
            self._drafts.pop(key, None)
            logger.info("discord: could not finish the live reply ({}); sending it", exc)
            return False
        except _sdk_errors() as exc:  # the outbox retries: the same preview is edited then
            raise _convert(exc, f"edit of the live reply in {msg.chat_id}") from exc
        self._drafts.pop(key, None)
        return True

    async def ask(self, chat_id: str, thread: str | None, question: Question) -> None:
        """The question with Allow / Deny buttons (message components); a press comes back
        as an interaction (:meth:`on_interaction`)."""
        import discord
        from discord.http import handle_message_parameters

        from vikingbot.channels.approval_ui import button_form

        if self._client is None:
            raise ChannelError("Discord channel is not started")
        problem = channel_problem(chat_id)
        if problem is not None:
            raise ChannelRejected(problem)
        view = discord.ui.View(timeout=None)
        for label, style, data in (
            ("Allow", discord.ButtonStyle.success, question.approve),
            ("Deny", discord.ButtonStyle.danger, question.deny),
        ):
            view.add_item(discord.ui.Button(label=label, style=style, custom_id=data))
        params = handle_message_parameters(
            content=button_form(question),
            view=view,
            allowed_mentions=discord.AllowedMentions.none(),
        )
        try:
            with params:
                async with asyncio.timeout(self.discord.send_timeout_s):
                    await self._client.http.send_message(int(chat_id), params=params)
        except _sdk_errors() as exc:
            raise _convert(exc, f"send (approval) to {chat_id}") from exc

    async def register_commands(self, menu: Sequence[tuple[str, str]]) -> None:
        """The commands as global application commands (``PUT .../commands``), each with one
        optional text option ``args``: Discord's "/" menu lists them."""
        if self._client is None or self._client.application_id is None:
            return
        payload = [
            {
                "name": name,
                "description": (summary or name)[:100],
                "type": 1,
                "options": [{"name": "args", "description": "what follows the command", "type": 3}],
            }
            for name, summary in menu
            if COMMAND_NAME.fullmatch(name)
        ]
        try:
            await self._client.http.bulk_upsert_global_commands(
                self._client.application_id, payload
            )
        except _sdk_errors() as exc:
            raise _convert(exc, "registering the application commands") from exc

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """discord.py's ``on_interaction``: a pressed approval button, or a slash command
        from the menu, is the command it stands for, from the person who pressed or typed
        it (then checked like typed text). A press is acknowledged with a deferred update
        (the message stays); a slash command is answered with the command as typed, and
        its reply follows as a message."""
        import discord

        from vikingbot.commands.registry import parse

        if interaction.type is discord.InteractionType.application_command:
            await self._slash(interaction)
            return
        if interaction.type is not discord.InteractionType.component:
            return
        data: Any = interaction.data or {}
        custom = data.get("custom_id") if isinstance(data, dict) else None
        with contextlib.suppress(*_sdk_errors()):
            await interaction.response.defer()
        inv = parse(custom if isinstance(custom, str) else "")
        if inv is None or inv.name not in ("approve", "deny") or interaction.channel_id is None:
            return
        await self.accept(
            InboundMessage(
                channel=self.name,
                chat_id=str(interaction.channel_id),
                sender_id=str(interaction.user.id),
                text=f"/{inv.name} {' '.join(inv.args)}".strip(),
                metadata={"interaction": str(interaction.id)},
            )
        )

    async def _slash(self, interaction: discord.Interaction) -> None:
        data: Any = interaction.data if isinstance(interaction.data, dict) else {}
        name = data.get("name")
        if not isinstance(name, str) or not COMMAND_NAME.fullmatch(name):
            return
        args = ""
        for option in data.get("options") or []:
            if isinstance(option, dict) and option.get("name") == "args":
                value = option.get("value")
                args = value[:2000] if isinstance(value, str) else ""
        text = f"/{name} {args}".strip()
        if interaction.channel_id is None:
            return
        sender, chat = str(interaction.user.id), str(interaction.channel_id)
        allowed = self.allowed(sender, chat)  # else only the asker sees the answer
        with contextlib.suppress(*_sdk_errors()):
            await interaction.response.send_message(
                text[:2000] if allowed else "This bot does not take commands from you here.",
                ephemeral=not allowed,
            )
        await self.accept(
            InboundMessage(
                channel=self.name,
                chat_id=chat,
                sender_id=sender,
                text=text,
                metadata={"interaction": str(interaction.id)},
            )
        )
