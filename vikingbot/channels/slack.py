"""Slack through the official SDK: Web API for sending, Socket Mode for receiving.

Inbound: ``message`` events (DMs, channels, private channels, threads) arrive
over a Socket Mode websocket; each envelope is acknowledged first, then the
message passes the allow-list. The bot's own messages and edits/deletions are
ignored. A reply goes to the same chat and, for a message in a thread, the same
thread (``thread_ts``).

Outbound: ``chat.postMessage`` with ``thread_ts`` for threads. Slack SDK errors
are converted here: ``ratelimited`` becomes :class:`ChannelBusy`, errors that no
retry can fix (unknown channel, bad token) :class:`ChannelRejected`.

Each message carries its outbox key as message metadata (``event_type``
``vikingbot_outbox``). When a gateway died while a message was on the wire, the
gateway that takes the outbox row over asks :meth:`SlackChannel.arrived`, which
looks for that key in the chat's history (``conversations.history``, or
``conversations.replies`` in a thread) since the row was written, and the message
is not sent again when it is there. The history scopes (``im:history``,
``channels:history``, ...) are the ones the bot's message events need already;
without them, or on any error, the answer is "cannot tell" and the message is sent
again.

Live replies (``stream_replies``): :meth:`SlackChannel.draft` posts the reply so far
once (as the model wrote it) and then edits that message with ``chat.update``, at most one edit
every :attr:`SlackChannel.edit_every_s` (Slack allows about one message a second per
channel); the turn's final :meth:`send` updates the same message to the formatted
reply, with its outbox metadata. A refused update (the preview deleted, too old to
edit) posts the reply anew; a ``ratelimited`` one is retried by the outbox.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from loguru import logger
from pydantic import SecretStr

from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.channels.base import Channel, Problems, has_secret
from vikingbot.channels.slack_files import attachment, file_refs
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelBusy, ChannelError, ChannelRejected, NotConfiguredError

if TYPE_CHECKING:
    from slack_sdk.socket_mode.aiohttp import SocketModeClient
    from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
    from slack_sdk.socket_mode.request import SocketModeRequest
    from slack_sdk.web.async_client import AsyncWebClient

    from vikingbot.channels.approval_ui import Question

CONNECT_TIMEOUT_S = 20.0
PERMANENT_ERRORS = frozenset(
    {
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "msg_too_long",
        "no_text",
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "missing_scope",
        "restricted_action",
        "cannot_dm_bot",
    }
)
ACCEPTED_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
METADATA_EVENT = "vikingbot_outbox"  # message metadata naming a message's outbox key
ARRIVED_MARGIN_S = 300.0  # history looked at from this long before the row was written
ARRIVED_PAGES = 5  # of 200 messages: a busier chat since then is "cannot tell"


def _sdk_errors() -> tuple[type[BaseException], ...]:
    """Exception types the Slack SDK and its transport raise."""
    import aiohttp
    from slack_sdk.errors import SlackClientError

    return (SlackClientError, aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError)


def _convert(exc: BaseException, what: str) -> ChannelError:
    """A Slack SDK / transport error as a :class:`ChannelError` naming what failed."""
    from slack_sdk.errors import SlackApiError

    if isinstance(exc, SlackApiError):
        response = exc.response
        try:
            code = str(response.get("error") or f"HTTP {response.status_code}")
        except (ValueError, TypeError, AttributeError):
            code = "unreadable response"
        text = f"Slack {what} failed: {code}"
        if code == "ratelimited" or getattr(response, "status_code", 0) == 429:
            after = (getattr(response, "headers", None) or {}).get("Retry-After", "")
            return ChannelBusy(text, float(after) if str(after).isdigit() else None)
        if code in PERMANENT_ERRORS:
            return ChannelRejected(text)
        return ChannelError(text)
    return ChannelError(f"Slack {what} failed: {type(exc).__name__}: {exc}")


def _carries(message: Any, key: str) -> bool:
    """Whether a history message carries outbox key ``key`` in its metadata."""
    meta = message.get("metadata") if isinstance(message, dict) else None
    if not isinstance(meta, dict) or meta.get("event_type") != METADATA_EVENT:
        return False
    payload = meta.get("event_payload")
    return isinstance(payload, dict) and payload.get("key") == key


class SlackSettings(ChannelBase):
    """``bot.channels.slack``: the common channel keys plus these."""

    bot_token: SecretStr | None = None  # xoxb-...
    app_token: SecretStr | None = None  # xapp-... (Socket Mode)
    api_base: str | None = None


class SlackChannel(Channel):
    name: ClassVar[str] = "slack"
    settings: ClassVar[type[ChannelBase]] = SlackSettings

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, SlackSettings)
        missing = [] if has_secret(section.bot_token) else ["bot_token"]
        notes = (
            []
            if has_secret(section.app_token)
            else ["no app_token: can send, cannot receive (Socket Mode)"]
        )
        return Problems(missing, notes)

    max_message_chars: ClassVar[int | None] = 4000
    exclusive_inbound: ClassVar[bool] = True  # one Socket Mode consumer per app
    edit_every_s: ClassVar[float | None] = 1.2  # Slack: about one message a second a channel

    def __init__(self, config: SlackSettings, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.slack: SlackSettings = config
        self._web: AsyncWebClient | None = None
        self._socket: SocketModeClient | None = None
        self.bot_user_id: str | None = None
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._drafts: dict[tuple[str, str | None], str] = {}  # live replies: message ts

    def _web_client(self) -> AsyncWebClient:
        from slack_sdk.web.async_client import AsyncWebClient

        token = self.slack.bot_token
        if token is None or not token.get_secret_value():
            raise NotConfiguredError("Slack needs bot.channels.slack.bot_token (xoxb-...)")
        kwargs: dict[str, Any] = {"token": token.get_secret_value(), "timeout": 30}
        if self.slack.api_base:
            kwargs["base_url"] = self.slack.api_base.rstrip("/") + "/"
        return AsyncWebClient(**kwargs)

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus
        web = self._web_client()
        try:
            auth = await web.auth_test()
        except _sdk_errors() as exc:
            raise _convert(exc, "auth.test") from exc
        self._web = web
        self.bot_user_id = auth.get("user_id")
        app_token = self.slack.app_token
        if app_token is None or not app_token.get_secret_value():
            logger.warning("slack: no app_token (xapp-...); sending only, nothing is received")
            return
        if not self.defer_receiving:
            await self.start_receiving()

    async def start_receiving(self) -> None:
        from slack_sdk.socket_mode.aiohttp import SocketModeClient

        app_token = self.slack.app_token
        web = self._web
        if web is None or self._socket is not None:
            return
        if app_token is None or not app_token.get_secret_value():
            return
        socket = SocketModeClient(app_token=app_token.get_secret_value(), web_client=web)
        socket.socket_mode_request_listeners.append(self._on_request)
        self._socket = socket
        try:
            socket.wss_uri = await socket.issue_new_wss_url()
            await asyncio.wait_for(socket.connect(), timeout=CONNECT_TIMEOUT_S)
        except _sdk_errors() as exc:
            await self.stop_receiving()
            raise _convert(exc, "Socket Mode connect") from exc
        logger.info("slack: connected as {} over Socket Mode", self.bot_user_id)

    @property
    def receiving(self) -> bool:
        return self._socket is not None

    async def stop(self) -> None:
        await self.stop_receiving()

    async def stop_receiving(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            try:
                await socket.close()
            except Exception as exc:
                logger.warning("slack: closing the Socket Mode connection failed: {}", exc)

    async def _on_request(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        from slack_sdk.socket_mode.response import SocketModeResponse

        await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        if req.type in ("slash_commands", "interactive"):  # a command or a pressed button
            pressed = command_from(req.type, req.payload)
            if pressed is not None:
                await self.accept(pressed)
            return
        if req.type != "events_api":
            return
        event_id = str(req.payload.get("event_id") or req.envelope_id)
        if event_id in self._seen:
            return
        self._seen[event_id] = None
        while len(self._seen) > 1000:
            self._seen.popitem(last=False)
        msg = self.inbound_from_event(req.payload.get("event") or {})
        if msg is not None:
            await self.accept(msg)

    def inbound_from_event(self, event: dict[str, Any]) -> InboundMessage | None:
        """An ``InboundMessage`` for a person's message event, None for anything else."""
        if event.get("type") != "message" or event.get("subtype") not in ACCEPTED_SUBTYPES:
            return None
        user, chat, text = event.get("user"), event.get("channel"), event.get("text")
        if event.get("bot_id") or not user or user == self.bot_user_id:
            return None
        files = file_refs(event)
        if not isinstance(chat, str) or not isinstance(text, str):
            return None
        if not text.strip() and not files:
            return None
        token = self.slack.bot_token.get_secret_value() if self.slack.bot_token else ""
        return InboundMessage(
            channel=self.name,
            chat_id=chat,
            sender_id=str(user),
            text=text,
            thread=event.get("thread_ts"),
            metadata={"ts": event.get("ts"), "channel_type": event.get("channel_type")},
            attachments=tuple(attachment(f, token, self.slack.api_base) for f in files),
        )

    async def send(self, msg: OutboundMessage) -> None:
        if self._web is None:
            raise ChannelError("Slack channel is not started")
        from vikingbot.channels.markup import to_slack_mrkdwn

        metadata = None
        if msg.dedupe_key:
            metadata = {"event_type": METADATA_EVENT, "event_payload": {"key": msg.dedupe_key}}
        if await self._finish_draft(msg, to_slack_mrkdwn(msg.text), metadata):
            return
        try:
            await self._web.chat_postMessage(
                channel=msg.chat_id,
                text=to_slack_mrkdwn(msg.text),
                thread_ts=msg.thread,
                mrkdwn=True,
                metadata=metadata,
            )
        except _sdk_errors() as exc:
            raise _convert(exc, f"chat.postMessage to {msg.chat_id}") from exc

    async def draft(self, chat_id: str, thread: str | None, text: str) -> None:
        """The reply so far: posted once (plain text), then ``chat.update``."""
        if self._web is None:
            raise ChannelError("Slack channel is not started")
        key = (chat_id, thread)
        ts = self._drafts.get(key)
        try:
            if ts is None:
                # mrkdwn left at Slack's default (on): chat.update, which turns this into
                # the formatted reply, takes no such flag
                sent = await self._web.chat_postMessage(
                    channel=chat_id, text=text, thread_ts=thread
                )
                posted = sent.get("ts")
                if isinstance(posted, str) and posted:
                    self._drafts[key] = posted
            else:
                await self._web.chat_update(channel=chat_id, ts=ts, text=text)
        except _sdk_errors() as exc:
            raise _convert(exc, f"live reply in {chat_id}") from exc

    async def _finish_draft(
        self, msg: OutboundMessage, text: str, metadata: dict[str, Any] | None
    ) -> bool:
        """The reply's first piece replaces the chat's live preview (True: done here)."""
        from slack_sdk.errors import SlackApiError

        web, key = self._web, (msg.chat_id, msg.thread)
        ts = self._drafts.get(key)
        if ts is None or web is None:
            return False
        try:
            await web.chat_update(channel=msg.chat_id, ts=ts, text=text, metadata=metadata)
        except _sdk_errors() as exc:
            error = _convert(exc, f"chat.update of the live reply in {msg.chat_id}")
            if isinstance(error, ChannelBusy) or not isinstance(exc, SlackApiError):
                raise error from exc  # the outbox retries: the same preview is updated then
            self._drafts.pop(key, None)
            logger.info("slack: could not finish the live reply ({}); sending it", error)
            return False
        self._drafts.pop(key, None)
        return True

    async def arrived(self, msg: OutboundMessage, *, since: datetime) -> bool | None:
        """Whether a message carrying ``msg``'s outbox key is in the chat (or thread)
        since ``since`` (less a margin for clocks); None when Slack cannot say."""
        web, key = self._web, msg.dedupe_key
        if web is None or not key:
            return None
        oldest = f"{since.timestamp() - ARRIVED_MARGIN_S:.6f}"
        cursor: str | None = None
        try:
            for _ in range(ARRIVED_PAGES):
                if msg.thread:
                    page = await web.conversations_replies(
                        channel=msg.chat_id,
                        ts=msg.thread,
                        oldest=oldest,
                        include_all_metadata=True,
                        limit=200,
                        cursor=cursor,
                    )
                else:
                    page = await web.conversations_history(
                        channel=msg.chat_id,
                        oldest=oldest,
                        include_all_metadata=True,
                        limit=200,
                        cursor=cursor,
                    )
                if any(_carries(m, key) for m in page.get("messages") or []):
                    return True
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if cursor is None:
                    return False
        except _sdk_errors() as exc:
            logger.warning(
                "slack: cannot look up {} in {}'s history: {}",
                key,
                msg.chat_id,
                _convert(exc, "conversations history"),
            )
        return None

    async def ask(self, chat_id: str, thread: str | None, question: Question) -> None:
        """The question with Allow / Deny buttons (Block Kit); a press comes back as the
        command its value holds (``command_from``)."""
        from vikingbot.channels.approval_ui import button_form

        if self._web is None:
            raise ChannelError("Slack channel is not started")
        text = button_form(question)
        buttons = [
            {"type": "button", "text": {"type": "plain_text", "text": label}, "value": value}
            for label, value in (("Allow", question.approve), ("Deny", question.deny))
        ]
        blocks: list[dict[str, Any]] = [
            {"type": "section", "text": {"type": "plain_text", "text": text[:2900]}},
            {"type": "actions", "block_id": f"approval-{question.id}", "elements": buttons},
        ]
        try:
            await self._web.chat_postMessage(
                channel=chat_id, text=text, thread_ts=thread, blocks=blocks
            )
        except _sdk_errors() as exc:
            raise _convert(exc, f"chat.postMessage (approval) to {chat_id}") from exc


SLACK_BUTTON_COMMANDS = frozenset({"approve", "deny"})


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def command_from(kind: str, payload: Any) -> InboundMessage | None:
    """A Socket Mode ``slash_commands`` request (``/status`` registered as a Slack slash
    command) or an ``interactive`` button press (value ``/approve <id>``) as the command
    text from the person who sent it; None for anything else (total)."""
    from vikingbot.commands.registry import parse

    data = _dict(payload)
    thread: str | None = None
    if kind == "slash_commands":
        text = f"{_str(data.get('command'))} {_str(data.get('text'))}".strip()
        user, chat = _str(data.get("user_id")), _str(data.get("channel_id"))
    else:
        actions = data.get("actions")
        first = _dict(actions[0]) if isinstance(actions, list) and actions else {}
        text = _str(first.get("value"))
        user, chat = (
            _str(_dict(data.get("user")).get("id")),
            _str(_dict(data.get("channel")).get("id")),
        )
        thread = _str(_dict(data.get("message")).get("thread_ts")) or None
        inv = parse(text)
        if inv is None or inv.name not in SLACK_BUTTON_COMMANDS:
            return None
    if parse(text) is None or not user or not chat:
        return None
    return InboundMessage(channel="slack", chat_id=chat, sender_id=user, text=text, thread=thread)
