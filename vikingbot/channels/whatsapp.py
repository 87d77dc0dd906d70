"""WhatsApp through Meta's WhatsApp Cloud API: a signed webhook in, Graph ``messages`` out.

A plug-in in all but location: its settings model is here (:class:`WhatsAppSettings`,
section ``bot.channels.whatsapp``) and one entry point registers it. Meta ships no
official Python SDK for the Cloud API, so this speaks its HTTP API with httpx
(docs/channels.md has the set-up: a Meta developer app, a test number, the webhook).

Inbound: Meta posts to ``/whatsapp/webhook`` (the app's callback URL). ``GET`` is
the verify handshake (``hub.verify_token`` must equal ``verify_token``); a ``POST``
is read up to ``MAX_BODY_BYTES`` and used only when its ``X-Hub-Signature-256``
(HMAC-SHA256 of the raw body with ``app_secret``) is right: anything else is one
log line and a 401. A text message passes the allow-list (the sender's number, with
or without ``+``), is claimed once across gateways by its message id
(:class:`~vikingbot.channels.kept.FirstTake`; Meta redelivers what was not
acknowledged, for days) and written to the state database before the 200
(:class:`~vikingbot.channels.kept.KeptInbound`), so a gateway killed mid-turn loses
nothing. When a turn begins the message is marked read and the sender sees "typing".

The 24-hour window: WhatsApp lets a business send free text only within 24 hours of
the person's last message. Each person's last message time is kept in the state
database (``channels/position.py``, under ``whatsapp:chat:<number>``) so every
gateway knows it. A result for someone outside the window is sent as the configured
message ``template`` (its one body parameter is the text, flattened and cut to
``TEMPLATE_PARAM_CHARS``), or, with no template, refused with the reason
(``ChannelRejected``: the outbox records it, nothing is retried).

Outbound: ``POST /{version}/{phone_number_id}/messages``. The Cloud API has no
idempotency key: a piece in flight at a crash is sent again (at least once).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from loguru import logger
from pydantic import SecretStr

from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.channels.base import Channel, Problems, has_secret
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import (
    ChannelBusy,
    ChannelError,
    ChannelRejected,
    NotConfiguredError,
    StoreError,
)

if TYPE_CHECKING:
    import httpx
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from vikingbot.channels.kept import FirstTake, KeptInbound

MAX_BODY_BYTES = 1 << 20  # a webhook post larger than this is refused unread (413)
WINDOW = timedelta(hours=24)
TAKE_KEEP_S = 7 * 24 * 3600.0  # Meta redelivers an unacknowledged webhook for up to 7 days
TEMPLATE_PARAM_CHARS = 1000  # a template's text parameter may hold 1,024 characters
MAX_TEXT = 32_000
KEEPALIVE_S = 2.0  # idle connections dropped before a server's keep-alive ends
NUMBER = re.compile(r"\+?[0-9]{6,15}")
OUTSIDE_WINDOW = 131047  # Graph error: "Re-engagement message" (the window is closed)
BUSY_CODES = frozenset({4, 17, 32, 613, 80007, 130429, 131048, 131056})
REJECTED_CODES = frozenset({10, 100, 190, 131008, 131009, 131026, 131051, 132000, 132001})


class WhatsAppSettings(ChannelBase):
    """``bot.channels.whatsapp``: the common channel keys plus these."""

    phone_number_id: str | None = None  # WhatsApp Manager → API setup → Phone number ID
    access_token: SecretStr | None = None  # a system user's token (whatsapp_business_messaging)
    app_secret: SecretStr | None = None  # App settings → Basic: signs every webhook post
    verify_token: SecretStr | None = None  # any string; the same in the app's webhook setup
    template: str | None = None  # an approved template with one body parameter {{1}}
    template_language: str = "en_US"
    api_base: str = "https://graph.facebook.com"  # only for a proxy or a test server
    api_version: str = "v21.0"
    typing: bool = True  # mark a message read and show "typing" while its turn runs
    send_timeout_s: float = 30.0


class WhatsAppText(NamedTuple):
    """A person's text message from a webhook post."""

    number: str  # digits, no "+": the wa_id Meta uses as the chat
    message_id: str
    text: str
    ts: int  # seconds since the epoch (Meta's timestamp)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` (``sha256=<hex>``) is the HMAC-SHA256 of ``body`` with ``secret``."""
    scheme, _, given = (header or "").partition("=")
    if scheme != "sha256" or not given:
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), given.strip().lower().encode())


def texts(payload: Any) -> list[WhatsAppText]:
    """The people's text messages in one webhook post (total: anything else is skipped)."""
    found: list[WhatsAppText] = []
    for entry in _list(_dict(payload).get("entry")):
        for change in _list(_dict(entry).get("changes")):
            change = _dict(change)
            if change.get("field") != "messages":
                continue
            for message in _list(_dict(change.get("value")).get("messages")):
                message = _dict(message)
                number, mid, ts = message.get("from"), message.get("id"), message.get("timestamp")
                body: Any = None
                if message.get("type") == "text":
                    body = _dict(message.get("text")).get("body")
                elif message.get("type") == "button":
                    body = _dict(message.get("button")).get("text")
                if not (isinstance(number, str) and NUMBER.fullmatch(number)):
                    continue
                if not (isinstance(mid, str) and 0 < len(mid) <= 200):
                    continue
                if not isinstance(body, str) or not body.strip():
                    logger.debug("whatsapp: skipped a {} message (not text)", message.get("type"))
                    continue
                seconds = int(ts) if isinstance(ts, str) and ts.isdigit() and len(ts) < 12 else 0
                found.append(WhatsAppText(number.lstrip("+"), mid, body[:MAX_TEXT], seconds))
    return found


def failed_statuses(payload: Any) -> list[tuple[str, str]]:
    """(recipient, reason) of each ``failed`` delivery status in a webhook post (total)."""
    failed: list[tuple[str, str]] = []
    for entry in _list(_dict(payload).get("entry")):
        for change in _list(_dict(entry).get("changes")):
            for status in _list(_dict(_dict(change).get("value")).get("statuses")):
                status = _dict(status)
                if status.get("status") != "failed":
                    continue
                errors = [_dict(e) for e in _list(status.get("errors"))]
                why = "; ".join(f"{e.get('code')}: {e.get('title')}" for e in errors) or "unknown"
                failed.append((str(status.get("recipient_id"))[:20], why[:300]))
    return failed


def template_text(text: str) -> str:
    """``text`` as a template parameter: no line breaks or tabs, no runs of spaces, cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= TEMPLATE_PARAM_CHARS else flat[: TEMPLATE_PARAM_CHARS - 1] + "…"


def _graph_error(response: httpx.Response, what: str) -> ChannelError:
    try:
        error = _dict(_dict(response.json()).get("error"))
    except ValueError:
        error = {}
    code = error.get("code")
    details = _dict(error.get("error_data")).get("details") or error.get("message") or ""
    text = f"WhatsApp {what} failed: HTTP {response.status_code} (code {code}): {details}"[:500]
    if response.status_code == 429 or code in BUSY_CODES:
        return ChannelBusy(text)
    if response.status_code >= 500:
        return ChannelError(text)
    if code in REJECTED_CODES or response.status_code in (400, 401, 403, 404):
        return ChannelRejected(text)
    return ChannelError(text)


class WhatsAppChannel(Channel):
    name: ClassVar[str] = "whatsapp"
    settings: ClassVar[type[ChannelBase]] = WhatsAppSettings
    max_message_chars: ClassVar[int | None] = 4096  # the Cloud API's text body limit

    def __init__(self, config: ChannelBase, **kwargs: Any) -> None:
        from vikingbot.channels.kept import FirstTake, KeptInbound
        from vikingbot.store.liveness import process_id

        super().__init__(config, **kwargs)
        assert isinstance(config, WhatsAppSettings)
        self.whatsapp = config
        self._http: httpx.AsyncClient | None = None
        store = self._store
        self.kept: KeptInbound | None = (
            KeptInbound(self.name, store, self._clock, self.gateway) if store else None
        )
        owner = self.gateway or process_id()
        self.first: FirstTake = FirstTake(self.name, store, self._clock, owner, keep_s=TAKE_KEEP_S)
        self._last_seen: dict[str, int] = {}  # this process's view of each window's start

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, WhatsAppSettings)
        missing = [] if section.phone_number_id else ["phone_number_id"]
        missing += [] if has_secret(section.access_token) else ["access_token"]
        notes = []
        if not (has_secret(section.app_secret) and has_secret(section.verify_token)):
            notes.append("no app_secret or verify_token: can send, cannot receive messages")
        if not section.template:
            notes.append("no template: results outside the 24-hour window are not sent")
        return Problems(missing, notes)

    @classmethod
    async def check_credentials(cls, section: ChannelBase) -> str | None:
        assert isinstance(section, WhatsAppSettings)
        channel = cls(section)
        channel._open()
        try:
            assert channel._http is not None
            path = f"/{section.api_version}/{section.phone_number_id}"
            try:
                response = await channel._http.get(
                    path, params={"fields": "display_phone_number,verified_name"}
                )
            except Exception as exc:
                raise ChannelError(f"WhatsApp number lookup failed: {exc!r}") from exc
            if response.status_code != 200:
                raise _graph_error(response, "number lookup")
            found = _dict(response.json())
        finally:
            await channel.stop()
        return f"sending as {found.get('verified_name')} ({found.get('display_phone_number')})"

    def _open(self) -> None:
        import httpx

        token = self.whatsapp.access_token
        if not self.whatsapp.phone_number_id or token is None or not token.get_secret_value():
            raise NotConfiguredError(
                "WhatsApp needs bot.channels.whatsapp.phone_number_id and .access_token"
            )
        self._http = httpx.AsyncClient(
            base_url=self.whatsapp.api_base.rstrip("/"),
            headers={"Authorization": f"Bearer {token.get_secret_value()}"},
            timeout=self.whatsapp.send_timeout_s,
            limits=httpx.Limits(keepalive_expiry=KEEPALIVE_S),
        )

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus
        self._open()
        if self.kept is not None:
            self.kept.start(bus)

    async def stop(self) -> None:
        if self.kept is not None:
            await self.kept.stop()
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    # ---- inbound ---------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        from starlette.routing import Route

        return [
            Route("/webhook", self._verify, methods=["GET"]),
            Route("/webhook", self._post, methods=["POST"]),
        ]

    async def _verify(self, request: Request) -> Response:
        from starlette.responses import PlainTextResponse

        token = self.whatsapp.verify_token
        query = request.query_params
        given = query.get("hub.verify_token", "")
        if (
            query.get("hub.mode") == "subscribe"
            and token is not None
            and token.get_secret_value()
            and hmac.compare_digest(given.encode(), token.get_secret_value().encode())
        ):
            return PlainTextResponse(query.get("hub.challenge", "")[:200])
        logger.warning("whatsapp: a webhook verification with a wrong verify_token was refused")
        return PlainTextResponse("verify token mismatch", status_code=403)

    async def _post(self, request: Request) -> Response:
        from starlette.responses import PlainTextResponse

        secret = self.whatsapp.app_secret
        if not self.running or secret is None or not secret.get_secret_value():
            return PlainTextResponse("whatsapp webhooks are not configured", status_code=503)
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_BODY_BYTES:
            return PlainTextResponse("body too large", status_code=413)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return PlainTextResponse("body too large", status_code=413)
        raw = bytes(body)
        if not signature_ok(
            secret.get_secret_value(), raw, request.headers.get("x-hub-signature-256")
        ):
            logger.warning(
                "whatsapp: a webhook post with a missing or wrong signature was refused ({} bytes)",
                len(raw),
            )
            return PlainTextResponse("bad signature", status_code=401)
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError):
            logger.warning("whatsapp: a signed webhook post that is not JSON was skipped")
            return PlainTextResponse("ok")
        for number, why in failed_statuses(payload):
            logger.warning("whatsapp: a message to {} was not delivered: {}", number, why)
        try:
            for text in texts(payload):
                await self._take(text)
        except StoreError as exc:  # Meta delivers the post again later
            logger.warning("whatsapp: a message could not be kept ({}); asking Meta to retry", exc)
            return PlainTextResponse("try again", status_code=503)
        return PlainTextResponse("ok")

    async def _take(self, text: WhatsAppText) -> None:
        from vikingbot.channels import position

        msg = InboundMessage(
            channel=self.name,
            chat_id=text.number,
            sender_id="+" + text.number,
            text=text.text,
            metadata={"message_id": text.message_id},
        )
        if not self.allowed(msg.sender_id, msg.chat_id):
            await self.accept(msg)  # refused and audited there
            return
        if text.ts:  # the window opens with each of the person's messages
            self._last_seen[text.number] = max(self._last_seen.get(text.number, 0), text.ts)
            await position.advance(
                self._store, f"{self.name}:chat:{text.number}", text.ts, self._clock.now()
            )
        if not await self.first.first(text.message_id):
            logger.info("whatsapp: message {} was taken before", text.message_id)
            return
        if self.kept is not None:
            try:
                msg = await self.kept.keep(msg)
            except StoreError:  # 503: Meta retries, and the retry is taken again
                await self.first.forget(text.message_id)
                raise
        await self.accept(msg)

    async def answering(self, msg: InboundMessage) -> None:
        if self.kept is not None:
            await self.kept.answering(msg)
        message_id = msg.metadata.get("message_id")
        if self.whatsapp.typing and isinstance(message_id, str) and self._http is not None:
            read = {"messaging_product": "whatsapp", "status": "read", "message_id": message_id}
            read["typing_indicator"] = {"type": "text"}  # type: ignore[assignment]
            with contextlib.suppress(ChannelError):
                await self._post_message(read, what="typing")

    async def answered(self, msg: InboundMessage) -> None:
        if self.kept is not None:
            await self.kept.answered(msg)

    # ---- outbound --------------------------------------------------------

    async def _window_open(self, number: str) -> bool:
        from vikingbot.channels import position

        last = self._last_seen.get(number, 0)
        stored = await position.stored(self._store, f"{self.name}:chat:{number}")
        last = max(last, stored or 0)
        now = self._clock.now().timestamp()
        return last > 0 and now - last < WINDOW.total_seconds()

    async def send(self, msg: OutboundMessage) -> None:
        number = msg.chat_id.lstrip("+")
        if not NUMBER.fullmatch(number):
            raise ChannelRejected(f"a WhatsApp target is a phone number, not {msg.chat_id[:80]!r}")
        what = f"send to {number}"
        if not await self._window_open(number):
            await self._send_template(number, msg.text, what)
            return
        body = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": number,
            "type": "text",
            "text": {"preview_url": False, "body": msg.text},
        }
        try:
            await self._post_message(body, what=what)
        except ChannelRejected as exc:
            if f"(code {OUTSIDE_WINDOW})" not in str(exc):
                raise
            await self._send_template(number, msg.text, what)

    async def _send_template(self, number: str, text: str, what: str) -> None:
        template = self.whatsapp.template
        if not template:
            raise ChannelRejected(
                f"WhatsApp {what}: the person has not written in the last 24 hours, and "
                "WhatsApp then takes only a message template: set "
                "bot.channels.whatsapp.template (docs/channels.md)"
            )
        body = {
            "messaging_product": "whatsapp",
            "to": number,
            "type": "template",
            "template": {
                "name": template,
                "language": {"code": self.whatsapp.template_language},
                "components": [
                    {"type": "body", "parameters": [{"type": "text", "text": template_text(text)}]}
                ],
            },
        }
        await self._post_message(body, what=f"{what} (template {template})")

    async def _post_message(self, body: dict[str, Any], *, what: str) -> None:
        import httpx

        if self._http is None:
            raise ChannelError("WhatsApp channel is not started")
        path = f"/{self.whatsapp.api_version}/{self.whatsapp.phone_number_id}/messages"
        try:
            async with asyncio.timeout(self.whatsapp.send_timeout_s):  # not wait_for (3.11)
                response = await self._http.post(path, json=body)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise ChannelError(f"WhatsApp {what} failed: {exc!r}") from exc
        if response.status_code != 200:
            raise _graph_error(response, what)
