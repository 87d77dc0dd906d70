"""Matrix through mautrix: ``/sync`` in, ``PUT .../send/m.room.message/{txn}`` out.

A plug-in in all but location: its settings model is here (:class:`MatrixSettings`,
section ``bot.channels.matrix``) and it is registered by one entry point, as a
third party's channel would be (docs/extending.md walks through it).

Inbound: a receive loop (run through ``Channel.spawn``: in a gateway it is
supervised, so a lost connection is retried with backoff, shows in ``/health`` and
is told to the owner once) long-polls ``/sync``. Text messages pass the allow-list
(the sender's user id or the room id); in a group room (more than two members)
only messages that mention the bot are taken, unless ``group_messages`` is
``all``; a DM (two members) always. An invite from an allowed sender is joined,
any other is refused and audited. How far messages are handled (their server
time) is kept in the state database, so the next receiver (after a restart or a
failover) starts there; on the very first start, older history is not answered.

Outbound: Markdown becomes ``formatted_body`` (``org.matrix.custom.html``) beside the
plain ``body``. The transaction id is derived from the piece's outbox key, so a
piece sent again after a crash is the same transaction: the homeserver answers
with the event it already has instead of posting a second one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import html
import json
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple

from loguru import logger
from pydantic import SecretStr

from vikingbot.bus import Attachment, InboundMessage, MessageBus
from vikingbot.channels.base import Channel, Problems, ReceiveLoop, has_secret
from vikingbot.channels.matrix_media import MediaRef, download, media_ref
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelBusy, ChannelError, ChannelRejected, NotConfiguredError

if TYPE_CHECKING:
    from mautrix.client.api import ClientAPI

SYNC_TIMEOUT_MS = 30_000
TYPING_MS = 30_000
HISTORY_LIMIT = 50  # timeline events per room in a sync; more is "limited"
MAX_ROOM_ID = 255
TAKEN_TYPES = frozenset({"m.text", "m.emote"})  # m.notice is what bots send: never answered
PERMANENT = frozenset(
    {
        "M_FORBIDDEN",
        "M_UNKNOWN_TOKEN",
        "M_MISSING_TOKEN",
        "M_NOT_FOUND",
        "M_TOO_LARGE",
        "M_BAD_JSON",
        "M_NOT_JSON",
        "M_INVALID_PARAM",
        "M_USER_DEACTIVATED",
    }
)


class MatrixSettings(ChannelBase):
    """``bot.channels.matrix``: the common channel keys plus these."""

    homeserver: str | None = None  # e.g. https://matrix.example.org
    access_token: SecretStr | None = None
    group_messages: Literal["mentions", "all"] = "mentions"
    send_timeout_s: float = 30.0


class Text(NamedTuple):
    """A person's text message from a room timeline."""

    room: str
    sender: str
    text: str
    event_id: str
    ts: int
    thread: str | None
    mentioned: bool
    media: MediaRef | None = None  # the file of an m.image / m.audio / m.file


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _mentions(content: dict[str, Any], body: str, me: str) -> bool:
    listed = _dict(content.get("m.mentions")).get("user_ids")
    if isinstance(listed, list) and me in listed:
        return True
    html = content.get("formatted_body")
    localpart = me[1:].split(":", 1)[0] if me.startswith("@") else me
    return (
        me in body
        or (isinstance(html, str) and f"matrix.to/#/{me}" in html)
        or (bool(localpart) and body.lower().startswith(localpart.lower() + ":"))
    )


def text_event(room: str, event: Any, me: str) -> Text | None:
    """A :class:`Text` for a person's text message event, None for anything else (total)."""
    event = _dict(event)
    content = _dict(event.get("content"))
    sender, body = event.get("sender"), content.get("body")
    event_id, ts = event.get("event_id"), event.get("origin_server_ts")
    media = media_ref(content)
    if event.get("type") != "m.room.message" or (
        content.get("msgtype") not in TAKEN_TYPES and media is None
    ):
        return None
    if not isinstance(sender, str) or sender == me or not isinstance(body, str) or not body.strip():
        return None
    if not isinstance(event_id, str) or not isinstance(ts, int) or isinstance(ts, bool):
        return None
    relates = _dict(content.get("m.relates_to"))
    if relates.get("rel_type") == "m.replace":
        return None  # an edit: the original was the message
    root = relates.get("event_id")
    thread = root if relates.get("rel_type") == "m.thread" and isinstance(root, str) else None
    if media is not None:
        body = media.caption
    return Text(room, sender, body, event_id, ts, thread, _mentions(content, body, me), media)


def invite_from(state: Any, me: str) -> str | None:
    """Who invited the bot, from a room's ``invite_state`` (total)."""
    events = _dict(state).get("events")
    for event in events if isinstance(events, list) else []:
        event = _dict(event)
        if event.get("type") == "m.room.member" and event.get("state_key") == me:
            sender = event.get("sender")
            if _dict(event.get("content")).get("membership") == "invite" and isinstance(
                sender, str
            ):
                return sender
    return None


def txn_id(key: str) -> str:
    """The transaction id for an outbox piece: the same key, the same transaction."""
    return "vikingbot-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def room_problem(chat_id: str) -> str | None:
    """Why ``chat_id`` cannot be a room id (``!opaque:server``), or None."""
    if not chat_id.startswith("!") or len(chat_id) < 2 or len(chat_id) > MAX_ROOM_ID:
        return f"a Matrix target is a room id like !abc:example.org, not {chat_id[:80]!r}"
    if any(c.isspace() for c in chat_id):
        return f"a Matrix room id has no spaces: {chat_id[:80]!r}"
    return None


def to_matrix_html(markdown: str) -> str:
    """Markdown as Matrix HTML: raw HTML in it shown as text, images as links."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
    parser.add_render_rule("image", _image_as_link)
    return parser.render(markdown).strip("\n")


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = html.escape(str(token.attrs.get("src", "")), quote=True)
    alt = html.escape(token.content or str(token.attrs.get("src", "")), quote=False)
    return f'<a href="{src}">{alt}</a>'


def _convert(exc: BaseException, what: str) -> ChannelError:
    """A mautrix / transport error as a :class:`ChannelError` naming what failed."""
    from mautrix.errors import MatrixRequestError

    if isinstance(exc, MatrixRequestError):
        code = getattr(exc, "errcode", None) or f"HTTP {getattr(exc, 'http_status', '?')}"
        why = getattr(exc, "message", None) or str(exc)
        text = f"Matrix {what} failed: {code}: {why}"
        status = getattr(exc, "http_status", 0)
        if code == "M_LIMIT_EXCEEDED" or status == 429:
            return ChannelBusy(text)
        if code in PERMANENT or status in (400, 401, 403, 404, 413):
            return ChannelRejected(text)
        return ChannelError(text)
    return ChannelError(f"Matrix {what} failed: {type(exc).__name__}: {exc}")


def _sdk_errors() -> tuple[type[BaseException], ...]:
    import aiohttp
    from mautrix.errors import MatrixError

    return (MatrixError, aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError)


SYNC_FILTER = json.dumps(
    {
        "presence": {"not_types": ["*"]},
        "account_data": {"not_types": ["*"]},
        "room": {
            "timeline": {"limit": HISTORY_LIMIT, "types": ["m.room.message", "m.room.member"]},
            "state": {"types": ["m.room.member"], "lazy_load_members": True},
            "ephemeral": {"not_types": ["*"]},
            "account_data": {"not_types": ["*"]},
        },
    },
    separators=(",", ":"),
)


class MatrixChannel(Channel):
    name: ClassVar[str] = "matrix"
    settings: ClassVar[type[ChannelBase]] = MatrixSettings
    # An event may be 64 KiB with body and formatted_body; 8,000 characters leaves room
    # for three-byte characters and the HTML beside the plain text.
    max_message_chars: ClassVar[int | None] = 8000
    exclusive_inbound: ClassVar[bool] = True  # one /sync consumer per bot account
    idempotent_send: ClassVar[bool] = True  # the transaction id: a repeat is the same event
    edit_every_s: ClassVar[float | None] = 2.0  # under Synapse's default rc_message (0.2/s, 10)

    def __init__(self, config: ChannelBase, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        assert isinstance(config, MatrixSettings)
        self.matrix = config
        self._api: ClientAPI | None = None
        self.user_id = ""
        self._since: str | None = None
        self._handled_ts: int | None = None  # server time of the last handled message
        self._recorded_ts: int | None = None  # ... as the state database has it
        self._fresh = False  # no receiver ever handled a message: skip the history
        self._floor: int | None = None  # handled by an earlier receiver up to this time
        self._members: dict[str, int] = {}
        self._loop = ReceiveLoop(self, self._receive)
        self._drafts: dict[tuple[str, str | None], str] = {}  # live replies: event ids

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, MatrixSettings)
        missing = [] if section.homeserver else ["homeserver"]
        missing += [] if has_secret(section.access_token) else ["access_token"]
        return Problems(missing, [])

    @classmethod
    async def check_credentials(cls, section: ChannelBase) -> str | None:
        assert isinstance(section, MatrixSettings)
        api = _client(section)
        try:
            who = await api.whoami()
        except _sdk_errors() as exc:
            raise _convert(exc, f"whoami on {section.homeserver}") from exc
        finally:
            await api.api.session.close()
        return f"signed in as {who.user_id} on {section.homeserver}"

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus
        api = _client(self.matrix)
        try:
            who = await api.whoami()
        except _sdk_errors() as exc:
            await api.api.session.close()
            raise _convert(exc, f"whoami on {self.matrix.homeserver}") from exc
        self._api, self.user_id = api, str(who.user_id)
        logger.info("matrix: signed in as {} on {}", self.user_id, self.matrix.homeserver)
        if not self.defer_receiving:
            await self.start_receiving()

    async def start_receiving(self) -> None:
        if self._api is not None:
            self._loop.start()

    async def stop_receiving(self) -> None:
        await self._loop.stop()

    @property
    def receiving(self) -> bool:
        return self._loop.running

    async def stop(self) -> None:
        await self.stop_receiving()
        api, self._api = self._api, None
        if api is not None:
            await api.api.session.close()

    # ---- inbound ---------------------------------------------------------

    async def _receive(self) -> None:
        """Follow ``/sync`` until cancelled; raise :class:`ChannelError` when it fails
        (the supervisor starts it again after a pause, from where it was)."""
        from vikingbot.channels import position

        api = self._api
        if api is None:
            return
        if self._since is None:
            self._handled_ts = self._recorded_ts = await position.stored(self._store, self.name)
            self._fresh = self._handled_ts is None
            # Messages up to here were handled by an earlier receiver. Checked on every
            # sync, not only the first: Synapse may answer a first sync from its cache
            # of an earlier one of the same account, whose token lies before them.
            self._floor = self._handled_ts
        while True:
            try:
                data = await api.sync(
                    since=self._since,  # type: ignore[arg-type]
                    timeout=SYNC_TIMEOUT_MS if self._since else 0,
                    filter_id=SYNC_FILTER,  # type: ignore[arg-type]
                )
            except _sdk_errors() as exc:
                error = _convert(exc, "sync")
                self.last_error = str(error)
                raise error from exc
            self.last_error = None
            await self._handle(_dict(data), floor=self._floor, skip=self._fresh)
            self._fresh = False
            batch = _dict(data).get("next_batch")
            if isinstance(batch, str):
                self._since = batch

    async def _handle(self, data: dict[str, Any], *, floor: int | None, skip: bool) -> None:
        from vikingbot.channels import position

        rooms = _dict(data.get("rooms"))
        for room, joined in _dict(rooms.get("join")).items():
            joined = _dict(joined)
            count = _dict(joined.get("summary")).get("m.joined_member_count")
            if isinstance(count, int):
                self._members[room] = count
            timeline = _dict(joined.get("timeline"))
            events = timeline.get("events")
            for event in events if isinstance(events, list) else []:
                if _dict(event).get("type") == "m.room.member":
                    self._members.pop(room, None)  # counted again when next needed
                    continue
                text = text_event(room, event, self.user_id)
                if text is None:
                    if _dict(event).get("type") == "m.room.message":
                        logger.debug("matrix: skipped an event in {} (not a person's text)", room)
                    continue
                await self._take(text, floor=floor, skip=skip)
        for room, invited in _dict(rooms.get("invite")).items():
            await self._invited(room, _dict(invited).get("invite_state"))
        if self._handled_ts is not None and self._handled_ts != self._recorded_ts:
            await position.advance(self._store, self.name, self._handled_ts, self._clock.now())
            self._recorded_ts = self._handled_ts

    async def _take(self, text: Text, *, floor: int | None, skip: bool) -> None:
        """Hand one message to the allow-list, unless an earlier receiver handled it
        (its time is at most ``floor``) or ``skip`` (history on the very first start)."""
        if floor is not None and text.ts <= floor:
            return
        self._handled_ts = max(self._handled_ts or 0, text.ts)
        if skip:
            return
        if not await self._addressed(text):
            return
        await self.accept(
            InboundMessage(
                channel=self.name,
                chat_id=text.room,
                sender_id=text.sender,
                text=_strip_mention(text.text, self.user_id),
                thread=text.thread,
                metadata={"event_id": text.event_id, "mentioned": text.mentioned},
                attachments=() if text.media is None else (self._attachment(text.media),),
            )
        )

    def _attachment(self, ref: MediaRef) -> Attachment:
        """``ref`` as an attachment, downloaded (authenticated media API) only when taken in."""

        async def fetch(limit: int) -> bytes:
            if self._api is None:
                raise ChannelError("Matrix channel is not started")
            try:
                return await download(self._api, self.matrix.homeserver or "", ref, limit)
            except _sdk_errors() as exc:
                raise _convert(exc, f"download of {ref.name}") from exc

        return Attachment(ref.name, fetch, mime=ref.mime, size=ref.size, kind=ref.kind)

    async def _addressed(self, text: Text) -> bool:
        """A DM always; in a group room a mention, unless ``group_messages`` is ``all``."""
        if text.mentioned or self.matrix.group_messages == "all":
            return True
        members = self._members.get(text.room)
        if members is None and self._api is not None:
            try:
                found = await self._api.get_joined_members(text.room)  # type: ignore[arg-type]
                members = self._members[text.room] = len(found)
            except _sdk_errors() as exc:
                logger.warning("matrix: cannot count the members of {}: {}", text.room, exc)
                members = 2
        return (members or 2) <= 2

    async def _invited(self, room: str, state: Any) -> None:
        inviter = invite_from(state, self.user_id)
        if inviter is None or self._api is None:
            return
        probe = InboundMessage(channel=self.name, chat_id=room, sender_id=inviter, text="")
        if not self.allowed(inviter, room):
            if self._should_audit(probe):
                await asyncio.to_thread(self._audit_refusal, probe)
            with contextlib.suppress(*_sdk_errors()):
                await self._api.leave_room(room)  # type: ignore[arg-type]
            return
        try:
            await self._api.join_room_by_id(room)  # type: ignore[arg-type]
            logger.info("matrix: joined {} (invited by {})", room, inviter)
        except _sdk_errors() as exc:
            logger.warning("matrix: cannot join {}: {}", room, _convert(exc, "join"))

    # ---- outbound --------------------------------------------------------

    async def send(self, msg: OutboundMessage) -> None:
        if self._api is None:
            raise ChannelError("Matrix channel is not started")
        problem = room_problem(msg.chat_id)
        if problem is not None:
            raise ChannelRejected(problem)
        content: dict[str, Any] = {
            "msgtype": "m.text",
            "body": msg.text,
            "format": "org.matrix.custom.html",
            "formatted_body": to_matrix_html(msg.text),
        }
        if msg.thread:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": msg.thread,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": msg.thread},
            }
        txn = txn_id(msg.dedupe_key) if msg.dedupe_key else None
        draft = self._drafts.get((msg.chat_id, msg.thread))
        if draft is not None:  # the reply replaces the live preview (m.replace)
            content = replacing(draft, content)
        try:
            await self._put(msg.chat_id, content, txn)
            self._drafts.pop((msg.chat_id, msg.thread), None)
        except ChannelRejected as exc:
            if "M_TOO_LARGE" not in str(exc):
                raise
            logger.warning("matrix: {}; sending the piece as plain text", exc)
            plain = {k: v for k, v in content.items() if k not in ("format", "formatted_body")}
            await self._put(msg.chat_id, plain, txn + "-plain" if txn else None)

    async def _put(self, room: str, content: dict[str, Any], txn: str | None) -> str:
        from mautrix.types import EventType

        assert self._api is not None
        try:
            async with asyncio.timeout(self.matrix.send_timeout_s):  # not wait_for (3.11)
                return await self._api.send_message_event(
                    room,  # type: ignore[arg-type]
                    EventType.ROOM_MESSAGE,
                    content,  # type: ignore[arg-type]
                    txn_id=txn,
                )
        except _sdk_errors() as exc:
            raise _convert(exc, f"send to {room}") from exc

    async def draft(self, chat_id: str, thread: str | None, text: str) -> None:
        """The reply so far: one ``m.text`` event, then ``m.replace`` edits of it."""
        if self._api is None:
            raise ChannelError("Matrix channel is not started")
        problem = room_problem(chat_id)
        if problem is not None:
            raise ChannelRejected(problem)
        key = (chat_id, thread)
        content: dict[str, Any] = {"msgtype": "m.text", "body": text}
        first = self._drafts.get(key)
        if first is not None:
            await self._put(chat_id, replacing(first, content), None)
            return
        if thread:
            content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread}
        self._drafts[key] = str(await self._put(chat_id, content, None))

    async def typing(self, chat_id: str, thread: str | None) -> None:
        """``PUT .../typing``: "typing…" for 30 s (the gateway renews it while a turn runs)."""
        if self._api is None or room_problem(chat_id) is not None:
            return
        try:
            await self._api.set_typing(chat_id, timeout=TYPING_MS)  # type: ignore[arg-type]
        except _sdk_errors() as exc:
            raise _convert(exc, f"typing in {chat_id}") from exc


def replacing(event_id: str, content: dict[str, Any]) -> dict[str, Any]:
    """``content`` as an edit (``m.replace``) of the event ``event_id`` (the spec's fallback
    body starts with ``* ``)."""
    new = {k: v for k, v in content.items() if k != "m.relates_to"}
    edit: dict[str, Any] = {**new, "body": f"* {new.get('body', '')}", "m.new_content": new}
    if "formatted_body" in new:
        edit["formatted_body"] = f"* {new['formatted_body']}"
    edit["m.relates_to"] = {"rel_type": "m.replace", "event_id": event_id}
    return edit


def _client(section: MatrixSettings) -> ClientAPI:
    from mautrix.client.api import ClientAPI

    token = section.access_token
    if not section.homeserver or token is None or not token.get_secret_value():
        raise NotConfiguredError(
            "Matrix needs bot.channels.matrix.homeserver and bot.channels.matrix.access_token"
        )
    return ClientAPI(base_url=section.homeserver.rstrip("/"), token=token.get_secret_value())


def _strip_mention(text: str, me: str) -> str:
    """The message without a leading ``@bot:server:`` / ``bot:`` address."""
    localpart = me[1:].split(":", 1)[0] if me.startswith("@") else me
    for prefix in (me + ":", me, localpart + ":"):
        if prefix and text.lower().startswith(prefix.lower()):
            rest = text[len(prefix) :].lstrip(" :,")
            return rest or text
    return text
