"""The webhook channel: outbound POSTs of JSON, inbound POSTs to the gateway.

Outbound, each message is POSTed to every URL in ``outbound_urls`` as
``{"channel", "chat_id", "thread", "text", "dedupe_key"}``; a receiver that
sees a ``dedupe_key`` twice may drop the second. A URL that already took a
message is not sent it again when another URL made the send retry.

Inbound, the gateway mounts :meth:`WebhookChannel.routes`: ``POST /webhook/inbound``
with ``Authorization: Bearer <inbound_token>`` and a JSON body
``{"sender_id", "chat_id", "text"}`` (optional ``"thread"``, and ``"files"``: pictures,
voice notes, documents as base64, ``bus.sent_files``; with files ``text`` may be empty
and the body may be up to 48 MiB, else 64 KiB is plenty).

An accepted message is written to the state database (``inbound_messages``,
:mod:`vikingbot.channels.inbound`) before the 202, and marked answered once the
reply is with delivery. A gateway that starts (or, every ``SWEEP_S``, finds a
dead gateway's rows) answers what is still pending, so a crash after the 202
loses nothing. When the database cannot take the message the answer is 503 and
the sender should retry. Files are not written there: a crash before the turn loses
them (the kept text says so to the turn that answers it after the restart).
"""

from __future__ import annotations

import hmac
import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from loguru import logger
from pydantic import Field, SecretStr

from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.bus.sent_files import FILES_LIMIT, SentFile, SentFilesError, parse_sent_files
from vikingbot.channels.base import Channel, Problems, has_secret
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelBusy, ChannelError, ChannelRejected, StoreError

if TYPE_CHECKING:
    import httpx
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute, Route


INBOUND_PATH = "/webhook/inbound"
MAX_BODY_BYTES = FILES_LIMIT  # a message with files (base64); without, a few KiB
MAX_FIELD_CHARS = {"sender_id": 200, "chat_id": 300, "thread": 300, "text": 32_000}
TIMEOUT_S = 15.0


class WebhookSettings(ChannelBase):
    """``bot.channels.webhook``: the common channel keys plus these."""

    outbound_urls: list[str] = Field(default_factory=list)
    inbound_token: SecretStr | None = None


class WebhookChannel(Channel):
    name: ClassVar[str] = "webhook"
    settings: ClassVar[type[ChannelBase]] = WebhookSettings
    max_message_chars: ClassVar[int | None] = None

    def __init__(self, config: WebhookSettings, **kwargs: Any) -> None:
        # the store (sqlalchemy) only when the channel runs: config validation imports
        # this module for WebhookSettings, and a cold `vikingbot status` must not pay for it
        from vikingbot.channels.kept import KeptInbound

        super().__init__(config, **kwargs)
        self.webhook: WebhookSettings = config
        self._client: httpx.AsyncClient | None = None
        self._done: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.kept = (
            KeptInbound(self.name, self._store, self._clock, self.gateway)
            if self._store is not None
            else None
        )

    async def start(self, bus: MessageBus) -> None:
        import httpx

        self._bus = bus
        self._client = httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False)
        if not self.webhook.outbound_urls:
            logger.info("webhook: no outbound_urls; messages for this channel cannot be sent")
        if self.kept is not None:
            self.kept.start(bus)

    async def stop(self) -> None:
        if self.kept is not None:
            await self.kept.stop()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def answering(self, msg: InboundMessage) -> None:
        if self.kept is not None:
            await self.kept.answering(msg)

    async def answered(self, msg: InboundMessage) -> None:
        if self.kept is not None:
            await self.kept.answered(msg)

    def _remember(self, key: str, url: str) -> None:
        self._done[(key, url)] = None
        while len(self._done) > 1000:
            self._done.popitem(last=False)

    async def send(self, msg: OutboundMessage) -> None:
        import httpx

        if self._client is None:
            raise ChannelError("webhook channel is not started")
        if not self.webhook.outbound_urls:
            raise ChannelRejected("webhook channel has no outbound_urls configured")
        body = {
            "channel": self.name,
            "chat_id": msg.chat_id,
            "thread": msg.thread,
            "text": msg.text,
            "dedupe_key": msg.dedupe_key,
        }
        key = msg.dedupe_key or ""
        failures: list[ChannelError] = []
        for url in self.webhook.outbound_urls:
            if key and (key, url) in self._done:
                continue
            try:
                response = await self._client.post(url, json=body)
            except httpx.HTTPError as exc:
                failures.append(ChannelError(f"webhook POST to {url} failed: {exc!r}"))
                continue
            status = response.status_code
            if 200 <= status < 300:
                if key:
                    self._remember(key, url)
                continue
            text = f"webhook POST to {url} answered HTTP {status}"
            if status == 429:
                after = response.headers.get("retry-after", "")
                failures.append(ChannelBusy(text, float(after) if after.isdigit() else None))
            elif status in (400, 401, 403, 404, 405, 410, 413, 422):
                failures.append(ChannelRejected(text))
            else:
                failures.append(ChannelError(text))
        if failures:
            transient = [f for f in failures if not isinstance(f, ChannelRejected)]
            raise transient[0] if transient else failures[0]

    async def receive(self, payload: Any) -> bool:
        """Validate an inbound JSON body and hand it to the bus; False when not allowed.

        Raises :class:`ChannelError` naming the bad field.
        """
        if not isinstance(payload, dict):
            raise ChannelError("body must be a JSON object with sender_id, chat_id and text")
        try:
            files = parse_sent_files(payload.get("files"))
        except SentFilesError as exc:
            raise ChannelError(str(exc)) from None
        fields: dict[str, str] = {}
        for name, cap in MAX_FIELD_CHARS.items():
            value = payload.get(name)
            if value is None and name == "thread":
                continue
            if name == "text" and files and value in (None, ""):
                value = ""  # a file with no words
            elif isinstance(value, int) and not isinstance(value, bool) and name != "text":
                value = str(value)
            if not isinstance(value, str) or (not value.strip() and not (name == "text" and files)):
                raise ChannelError(f"field {name!r} must be a non-empty string")
            if len(value) > cap:
                raise ChannelError(f"field {name!r} is longer than {cap} characters")
            if not value.isascii() and _not_utf8(value):
                raise ChannelError(f"field {name!r} holds an unpaired surrogate (\\ud800-\\udfff)")
            fields[name] = value
        msg = InboundMessage(
            channel=self.name,
            chat_id=fields["chat_id"],
            sender_id=fields["sender_id"],
            text=fields["text"],
            thread=fields.get("thread"),
            attachments=tuple(f.attachment() for f in files),
        )
        if self.kept is not None and self.allowed(msg.sender_id, msg.chat_id):
            # written down before the 202: a crash from here on loses nothing but the
            # files, which the kept text names for the turn that answers it then
            on_disk = replace(msg, text=_with_lost(msg.text, files)) if files else msg
            msg = replace(await self.kept.keep(on_disk), text=msg.text)
        return await self.accept(msg)

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, WebhookSettings)
        missing = [] if section.outbound_urls else ["outbound_urls"]
        notes = (
            []
            if has_secret(section.inbound_token)
            else [f"no inbound_token: POST {INBOUND_PATH} is off"]
        )
        return Problems(missing, notes)

    def routes(self) -> Sequence[BaseRoute]:
        """``POST /inbound``, checked against ``inbound_token`` (see :func:`_routes`)."""
        return _routes(self)

    def token_ok(self, header: str | None) -> bool:
        token = self.webhook.inbound_token
        if token is None or not token.get_secret_value():
            return False
        scheme, _, given = (header or "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), token.get_secret_value().encode())


def _with_lost(text: str, files: list[SentFile]) -> str:
    """The text as kept: what it says when the files did not survive a restart."""
    names = ", ".join(f.name[:60] for f in files)
    line = f"[{len(files)} file(s) sent with this message were lost in a restart: {names}]"
    return f"{text}\n{line}" if text.strip() else line


def _not_utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _routes(channel: WebhookChannel) -> list[Route]:
    """``POST /inbound`` (mounted by the gateway at ``/webhook/inbound``)."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def inbound(request: Request) -> Response:
        if not channel.running:
            return JSONResponse({"error": "the webhook channel is not running"}, status_code=503)
        if channel.webhook.inbound_token is None:
            return JSONResponse(
                {"error": "inbound webhooks are off: set bot.channels.webhook.inbound_token"},
                status_code=403,
            )
        if not channel.token_ok(request.headers.get("authorization")):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
            return JSONResponse({"error": "body too large"}, status_code=413)
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY_BYTES:
                return JSONResponse({"error": "body too large"}, status_code=413)
        try:
            payload = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: too deep
            return JSONResponse({"error": "body is not valid JSON"}, status_code=400)
        try:
            accepted = await channel.receive(payload)
        except ChannelError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except StoreError as exc:
            logger.warning("webhook: an inbound message could not be kept: {}", exc)
            return JSONResponse(
                {"error": "the state database is unreachable; try again later"},
                status_code=503,
                headers={"Retry-After": "5"},
            )
        if not accepted:
            return JSONResponse({"error": "sender is not allowed"}, status_code=403)
        return JSONResponse({"accepted": True}, status_code=202)

    return [Route("/inbound", inbound, methods=["POST"])]
