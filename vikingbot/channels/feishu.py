"""Feishu / Lark through lark-oapi: event callbacks in, ``POST /im/v1/messages`` out.

A plug-in in all but location: its settings model is here (:class:`FeishuSettings`,
section ``bot.channels.feishu``) and one entry point registers it (docs/extending.md).

Inbound: Feishu posts events to the gateway at ``/feishu/events`` (the "request URL"
of the app's event subscription). lark-oapi's event dispatcher answers the URL check,
checks the verification token (and decrypts, with an encrypt key); a message event
passes the allow-list (the sender's open_id or the chat id). In a group only a
message that mentions the bot is taken unless ``group_messages`` is ``all``; a p2p
chat always.

Feishu delivers an event again when it was not acknowledged within 3 s (after 15 s,
5 min, 1 h and 6 h), and a redelivery may reach another gateway on the same database
(docs/scaling.md) or this one after a restart. So an event is answered only by the
gateway that first claims its id in the state database (the lease
``feishu:event:<event_id>``, held for ``EVENT_KEEP_S`` and never released); a
process's own repeats are dropped without asking the database. When the database
cannot say (down, or no answer within ``CLAIM_WAIT_S``) the event is answered
anyway: at least once, never lost, and a warning is logged.

Outbound: a ``post`` message whose one paragraph is an ``md`` element (Feishu renders
the Markdown). The ``uuid`` is derived from the piece's outbox key: Feishu sends
only one message per uuid within an hour, so a piece sent again after a crash is
not posted twice.

Live replies (``stream_replies``): :meth:`FeishuChannel.draft` posts the reply so far
once and then edits it (``PUT /im/v1/messages/{id}``), at most one edit every
:attr:`FeishuChannel.edit_every_s`; the turn's final :meth:`send` edits the same message
to the reply. Feishu lets a message be edited only :data:`MAX_EDITS` times, so a long
reply's preview stops growing after ``MAX_EDITS - 1`` edits, keeping the last one for
the reply. A preview that cannot be edited (recalled, edited too often) gets the reply
posted anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from loguru import logger
from pydantic import SecretStr

from vikingbot.bus import Attachment, InboundMessage, MessageBus
from vikingbot.channels.approval_ui import Question, button_form
from vikingbot.channels.base import Channel, Problems, has_secret
from vikingbot.channels.feishu_files import FeishuFile, download, file_ref
from vikingbot.channels.kept import FirstTake
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import (
    ChannelBusy,
    ChannelError,
    ChannelRejected,
    NotConfiguredError,
)
from vikingbot.store.liveness import process_id

if TYPE_CHECKING:
    import lark_oapi as lark
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

FEISHU = "https://open.feishu.cn"
RATE_LIMITED = 99991400
BAD_TOKEN = frozenset({99991661, 99991663, 99991664, 99991671, 10003, 10014})
MAX_CHAT_ID = 128
EVENT_KEEP_S = 8 * 3600.0  # Feishu's last redelivery comes about 7.1 h after the first
CLAIM_WAIT_S = 2.0  # Feishu wants an answer to the callback within 3 s


class FeishuSettings(ChannelBase):
    """``bot.channels.feishu``: the common channel keys plus these."""

    app_id: str | None = None
    app_secret: SecretStr | None = None
    verification_token: SecretStr | None = None  # event subscription → Verification Token
    encrypt_key: SecretStr | None = None  # event subscription → Encrypt Key (optional)
    domain: str = FEISHU  # Lark (international): https://open.larksuite.com
    group_messages: Literal["mentions", "all"] = "mentions"
    send_timeout_s: float = 30.0


def uuid_for(key: str) -> str:
    """The send ``uuid`` for an outbox piece (Feishu allows 50 characters)."""
    return "vb-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def chat_problem(chat_id: str) -> str | None:
    """Why ``chat_id`` cannot be a Feishu chat id (``oc_...``), or None."""
    if not chat_id.startswith("oc_") or len(chat_id) > MAX_CHAT_ID or not chat_id.isascii():
        return f"a Feishu target is a chat id like oc_abc123, not {chat_id[:80]!r}"
    return None


def post_content(markdown: str) -> str:
    """The ``content`` of a post message showing ``markdown``."""
    return json.dumps({"zh_cn": {"content": [[{"tag": "md", "text": markdown}]]}})


def approval_card(q: Question) -> str:
    """The ``content`` of an interactive card asking ``q``: its text, and two buttons whose
    value is the command each stands for."""

    def button(label: str, kind: str, command: str) -> dict[str, Any]:
        text = {"tag": "plain_text", "content": label}
        return {"tag": "button", "text": text, "type": kind, "value": {"command": command}}

    text = {"tag": "plain_text", "content": button_form(q)}
    actions = [button("Allow", "primary", q.approve), button("Deny", "danger", q.deny)]
    card = {
        "config": {"wide_screen_mode": True},
        "elements": [{"tag": "div", "text": text}, {"tag": "action", "actions": actions}],
    }
    return json.dumps(card, ensure_ascii=False)


def message_text(content: Any, mention_keys: list[str]) -> str | None:
    """The text of a ``text`` message's content JSON without the bot's @ keys (total)."""
    try:
        data = json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return None
    text = data.get("text") if isinstance(data, dict) else None
    if not isinstance(text, str):
        return None
    for key in mention_keys:
        text = text.replace(key, "")
    return text.strip() or None


def _failure(code: int | None, why: str, status: int | None, what: str) -> ChannelError:
    text = f"Feishu {what} failed: code {code}: {why}"
    if code == RATE_LIMITED or status == 429:
        return ChannelBusy(text)
    if code in BAD_TOKEN or (status is not None and 400 <= status < 500) or (code or 0) >= 230000:
        return ChannelRejected(text)
    return ChannelError(text)


def _convert(exc: BaseException, what: str) -> ChannelError:
    """A lark-oapi / transport error as a :class:`ChannelError` naming what failed."""
    from lark_oapi.core.exception import ObtainAccessTokenException

    if isinstance(exc, ObtainAccessTokenException):  # the app id / secret were refused
        return _failure(exc.code, f"tenant access token refused: {exc.msg}", None, what)
    return ChannelError(f"Feishu {what} failed: {type(exc).__name__}: {exc}")


def _sdk_errors() -> tuple[type[BaseException], ...]:
    import httpx
    import requests
    from lark_oapi.core.exception import ObtainAccessTokenException

    return (
        ObtainAccessTokenException,
        httpx.HTTPError,
        requests.RequestException,
        asyncio.TimeoutError,
        OSError,
        ValueError,
    )


def _client(section: FeishuSettings) -> lark.Client:
    import lark_oapi as lark

    if not section.app_id or not has_secret(section.app_secret):
        raise NotConfiguredError(
            "Feishu needs bot.channels.feishu.app_id and bot.channels.feishu.app_secret"
        )
    assert section.app_secret is not None
    return (
        lark.Client.builder()
        .app_id(section.app_id)
        .app_secret(section.app_secret.get_secret_value())
        .domain(section.domain.rstrip("/"))
        .log_level(lark.LogLevel.WARNING)
        .build()
    )


async def _bot_info(client: lark.Client, section: FeishuSettings) -> dict[str, Any]:
    """``GET /open-apis/bot/v3/info``: who the app's bot is (signs in first)."""
    import lark_oapi as lark

    request = (
        lark.BaseRequest.builder()
        .http_method(lark.HttpMethod.GET)
        .uri("/open-apis/bot/v3/info")
        .token_types({lark.AccessTokenType.TENANT})
        .build()
    )
    what = f"sign-in as {section.app_id} on {section.domain}"
    try:
        response = await client.arequest(request)
    except _sdk_errors() as exc:
        raise _convert(exc, what) from exc
    status = response.raw.status_code if response.raw else None
    body = json.loads(response.raw.content) if response.raw and response.raw.content else {}
    if response.code not in (0, None) or not isinstance(body.get("bot"), dict):
        raise _failure(response.code, response.msg or str(body)[:200], status, what)
    bot: dict[str, Any] = body["bot"]
    return bot


MAX_EDITS = 20  # Feishu: a message may be edited at most 20 times


class FeishuChannel(Channel):
    name: ClassVar[str] = "feishu"
    settings: ClassVar[type[ChannelBase]] = FeishuSettings
    # A post may be 30 KB of JSON: 8,000 characters leaves room for three-byte ones.
    max_message_chars: ClassVar[int | None] = 8000
    idempotent_send: ClassVar[bool] = True  # uuid: one message per uuid within an hour
    edit_every_s: ClassVar[float | None] = 2.0  # 20 edits a message: long replies grow slower

    def __init__(self, config: ChannelBase, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        assert isinstance(config, FeishuSettings)
        self.feishu = config
        self._client: lark.Client | None = None
        self.bot_open_id = ""
        self._drafts: dict[tuple[str, str | None], tuple[str, int]] = {}  # (message id, edits)
        self.first = FirstTake(
            self.name,
            self._store,
            self._clock,
            self.gateway or process_id(),
            keep_s=EVENT_KEEP_S,
            wait_s=CLAIM_WAIT_S,
            kind="event",
        )

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, FeishuSettings)
        missing = [] if section.app_id else ["app_id"]
        missing += [] if has_secret(section.app_secret) else ["app_secret"]
        notes = (
            []
            if has_secret(section.verification_token)
            else ["no verification_token: can send, cannot receive events"]
        )
        return Problems(missing, notes)

    @classmethod
    async def check_credentials(cls, section: ChannelBase) -> str | None:
        assert isinstance(section, FeishuSettings)
        bot = await _bot_info(_client(section), section)
        return f"signed in as {bot.get('app_name')} ({bot.get('open_id')}) on {section.domain}"

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus
        client = _client(self.feishu)
        bot = await _bot_info(client, self.feishu)
        self._client, self.bot_open_id = client, str(bot.get("open_id") or "")
        logger.info("feishu: signed in as {} ({})", bot.get("app_name"), self.bot_open_id)

    async def stop(self) -> None:
        self._client = None

    # ---- inbound ---------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        from starlette.routing import Route

        return [Route("/events", self._event, methods=["POST"])]

    async def _event(self, request: Request) -> Response:
        import lark_oapi as lark
        from starlette.responses import Response

        token, key = self.feishu.verification_token, self.feishu.encrypt_key
        if self._client is None or token is None or not token.get_secret_value():
            return Response("feishu events are not configured", status_code=503)
        events: list[Any] = []
        presses: list[Any] = []

        def pressed(data: Any) -> Any:  # lark-oapi wants the card's answer at once
            from lark_oapi.event.callback.model.p2_card_action_trigger import (
                P2CardActionTriggerResponse,
            )

            presses.append(data)
            return P2CardActionTriggerResponse({})

        handler = (
            lark.EventDispatcherHandler.builder(
                key.get_secret_value() if key else "", token.get_secret_value()
            )
            .register_p2_im_message_receive_v1(events.append)
            .register_p2_card_action_trigger(pressed)
            .build()
        )
        raw = lark.RawRequest()
        raw.uri = request.url.path
        # lark-oapi looks headers up by their exact spelling (X-Lark-Signature...);
        # Starlette lower-cases them: give them back their canonical case
        raw.headers = {name.title(): value for name, value in request.headers.items()}
        raw.body = await request.body()  # at most 1 MiB: the gateway's BodyCap
        with _lark_quiet():
            answer = handler.do(raw)
        if answer.status_code and answer.status_code >= 400:
            said = (answer.content or b"").decode("utf-8", "replace")[:200]
            logger.warning(
                "feishu: refused a request from {}: {}",
                request.client.host if request.client else "?",
                said,
            )
            return Response('{"msg":"refused"}', status_code=401, media_type="application/json")
        for event in events:
            await self._take(event)
        for press in presses:
            await self._pressed(press)
        return Response(
            answer.content or b"",
            status_code=answer.status_code or 200,
            media_type="application/json",
        )

    async def _take(self, data: Any) -> None:
        """One ``im.message.receive_v1`` event: a turn if a person addressed the bot."""
        header, event = getattr(data, "header", None), getattr(data, "event", None)
        message, sender = getattr(event, "message", None), getattr(event, "sender", None)
        if message is None or sender is None or getattr(sender, "sender_type", "") != "user":
            return
        event_id = str(getattr(header, "event_id", "") or "")
        sender_id = getattr(getattr(sender, "sender_id", None), "open_id", None)
        chat_id = getattr(message, "chat_id", None)
        if not isinstance(sender_id, str) or not isinstance(chat_id, str):
            return
        mine = [
            str(m.key)
            for m in getattr(message, "mentions", None) or []
            if getattr(getattr(m, "id", None), "open_id", None) == self.bot_open_id and m.key
        ]
        text = None
        kind, content = getattr(message, "message_type", ""), getattr(message, "content", None)
        if kind == "text":
            text = message_text(content, mine)
        found = file_ref(kind, content, str(getattr(message, "message_id", "") or ""))
        if found is not None:
            text = ""
        if text is None:
            logger.debug("feishu: skipped a message in {} (not text)", chat_id)
            return
        p2p = getattr(message, "chat_type", "") == "p2p"
        if not (p2p or mine or self.feishu.group_messages == "all"):
            return
        if not await self.first.first(event_id):
            logger.info("feishu: event {} was taken before (a redelivery)", event_id)
            return
        await self.accept(
            InboundMessage(
                channel=self.name,
                chat_id=chat_id,
                sender_id=sender_id,
                text=text,
                metadata={"message_id": message.message_id, "mentioned": bool(mine)},
                attachments=() if found is None else (self._file(message.message_id, found),),
            )
        )

    async def _pressed(self, data: Any) -> None:
        """A ``card.action.trigger`` callback: a pressed approval button is the command it
        stands for, from the person who pressed it (then checked like typed text)."""
        from vikingbot.commands.registry import parse

        header, event = getattr(data, "header", None), getattr(data, "event", None)
        action, context = getattr(event, "action", None), getattr(event, "context", None)
        sender = getattr(getattr(event, "operator", None), "open_id", None)
        chat_id = getattr(context, "open_chat_id", None)
        value = getattr(action, "value", None)
        command = value.get("command") if isinstance(value, dict) else None
        if not isinstance(sender, str) or not isinstance(chat_id, str):
            return
        inv = parse(command if isinstance(command, str) else "")
        if inv is None or inv.name not in ("approve", "deny"):
            return
        event_id = str(getattr(header, "event_id", "") or "")
        if not await self.first.first(event_id):
            logger.debug("feishu: card action {} delivered again; dropped", event_id)
            return
        await self.accept(
            InboundMessage(
                channel=self.name,
                chat_id=chat_id,
                sender_id=sender,
                text=f"/{inv.name} {' '.join(inv.args)}".strip(),
                metadata={"card_action": event_id},
            )
        )

    def _file(self, message_id: str, ref: FeishuFile) -> Attachment:
        """A message's file, downloaded (message-resource API) only when taken in."""

        async def fetch(limit: int) -> bytes:
            if self._client is None:
                raise ChannelError("Feishu channel is not started")
            try:
                data, _name = await download(self._client, message_id, ref)
            except _sdk_errors() as exc:
                raise _convert(exc, f"download of {ref.name}") from exc
            return data

        return Attachment(ref.name, fetch, kind=ref.kind, duration_s=ref.duration_s)

    # ---- outbound --------------------------------------------------------

    async def send(self, msg: OutboundMessage) -> None:
        draft = self._drafts.get((msg.chat_id, msg.thread))
        if draft is not None:  # the reply's first piece replaces the live preview
            try:
                await self._update(draft[0], post_content(msg.text), msg.chat_id)
            except ChannelRejected as exc:  # recalled, or edited too often: send it anew
                logger.info("feishu: could not finish the live reply ({}); sending it", exc)
            else:
                self._drafts.pop((msg.chat_id, msg.thread), None)
                return
            self._drafts.pop((msg.chat_id, msg.thread), None)
        await self._create(msg.chat_id, "post", post_content(msg.text), msg.dedupe_key)

    async def draft(self, chat_id: str, thread: str | None, text: str) -> None:
        """The reply so far: posted once, then edited (up to ``MAX_EDITS - 1`` times)."""
        key = (chat_id, thread)
        found = self._drafts.get(key)
        if found is None:
            mid = await self._create(chat_id, "post", post_content(text), None)
            if mid:
                self._drafts[key] = (mid, 0)
            return
        mid, edits = found
        if edits >= MAX_EDITS - 1:  # the last edit Feishu allows is kept for the reply
            return
        await self._update(mid, post_content(text), chat_id)
        self._drafts[key] = (mid, edits + 1)

    async def _update(self, message_id: str, content: str, chat_id: str) -> None:
        from lark_oapi.api.im.v1 import UpdateMessageRequest, UpdateMessageRequestBody

        if self._client is None:
            raise ChannelError("Feishu channel is not started")
        body = UpdateMessageRequestBody.builder().msg_type("post").content(content).build()
        request = UpdateMessageRequest.builder().message_id(message_id).request_body(body)
        what = f"edit of the live reply in {chat_id}"
        try:
            async with asyncio.timeout(self.feishu.send_timeout_s):
                response = await self._client.im.v1.message.aupdate(request.build())
        except _sdk_errors() as exc:
            raise _convert(exc, what) from exc
        if not response.success():
            status = response.raw.status_code if response.raw else None
            raise _failure(response.code, response.msg or "", status, what)

    async def ask(self, chat_id: str, thread: str | None, question: Question) -> None:
        """The question as an interactive card with Allow / Deny buttons; a press comes
        back as a ``card.action.trigger`` callback on ``/feishu/events``."""
        await self._create(chat_id, "interactive", approval_card(question), None)

    async def _create(self, chat_id: str, kind: str, content: str, key: str | None) -> str:
        """Post a message; its message id ("" when Feishu did not say)."""
        from lark_oapi.api.im.v1 import CreateMessageRequest, CreateMessageRequestBody

        if self._client is None:
            raise ChannelError("Feishu channel is not started")
        problem = chat_problem(chat_id)
        if problem is not None:
            raise ChannelRejected(problem)
        body = (
            CreateMessageRequestBody.builder().receive_id(chat_id).msg_type(kind).content(content)
        )
        if key:
            body = body.uuid(uuid_for(key))
        request = (
            CreateMessageRequest.builder().receive_id_type("chat_id").request_body(body.build())
        )
        what = f"send to {chat_id}"
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel
            # that comes as the send finishes (a stopping gateway's cancel is lost)
            async with asyncio.timeout(self.feishu.send_timeout_s):
                response = await self._client.im.v1.message.acreate(request.build())
        except _sdk_errors() as exc:
            raise _convert(exc, what) from exc
        if not response.success():
            status = response.raw.status_code if response.raw else None
            raise _failure(response.code, response.msg or "", status, what)
        data = response.data
        return str(getattr(data, "message_id", None) or "")


@contextlib.contextmanager
def _lark_quiet() -> Iterator[None]:
    """lark-oapi logs a traceback for every request it refuses: a forged request is
    one line of ours instead (the SDK's logger is muted while it judges one)."""
    import logging

    lark_log = logging.getLogger("Lark")
    was = lark_log.disabled
    lark_log.disabled = True
    try:
        yield
    finally:
        lark_log.disabled = was
