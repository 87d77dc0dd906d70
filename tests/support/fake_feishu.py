"""A fake Feishu Open Platform on loopback, for lark-oapi, and its event pushes.

Server side: ``POST /open-apis/auth/v3/tenant_access_token/internal`` (code 10014 for
a wrong secret), ``GET /open-apis/bot/v3/info`` and ``POST /open-apis/im/v1/messages``
with Feishu's rules: a message per ``uuid`` within the hour (a repeat answers the
first message), post content up to 30 KB (else code 230025), a chat the bot is not in
(code 230002), and a scripted rate limit (HTTP 429, code 99991400);
``PUT /open-apis/im/v1/messages/{id}`` edits a sent message in place (what it showed
before kept in ``was``) with Feishu's rules: at most :data:`MAX_EDITS` edits a message
(then code 230072), a recalled one refused (code 230011, all are with ``recalled``),
and more than :attr:`FakeFeishu.edit_limit_per_s` edits a second in one chat answered
with the rate limit.

Client side: :meth:`FakeFeishu.push_text` posts an ``im.message.receive_v1`` event
(schema 2.0, with the verification token) to the bot's callback URL, as Feishu does.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

WAIT_TIMEOUT_S = 10.0
MAX_POST_BYTES = 30 * 1024
RATE_LIMITED = 99991400
MAX_EDITS = 20
_APPS = itertools.count(1)
BOT_OPEN_ID = "ou_bot0000000000000000000000000000"


class FakeFeishu:
    def __init__(
        self,
        *,
        app_id: str | None = None,
        app_secret: str = "fake-secret",
        verification_token: str = "fake-verification-token",
    ) -> None:
        # lark-oapi caches tenant tokens per app id for the process: one id per fake
        self.app_id = app_id or f"cli_fake_{next(_APPS)}"
        self.app_secret = app_secret
        self.verification_token = verification_token
        self.tenant_token = "t-fake-tenant-token"
        self.chats: set[str] = set()
        self.sent: list[dict[str, Any]] = []
        self.posts = 0
        self._by_uuid: dict[str, dict[str, Any]] = {}
        self._limits = 0
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self.resources: dict[tuple[str, str], bytes] = {}  # (message id, key) -> bytes
        self.downloads: list[tuple[str, str, str]] = []  # (message id, key, type) fetched
        self.edits: list[dict[str, Any]] = []  # edits taken: message_id, content, at
        self.created_at: dict[str, float] = {}  # message id -> time.monotonic() it was sent
        self.refused_edits = 0  # edits answered with the rate limit
        self.edit_limit_per_s = 2
        self.recalled = False  # every sent message recalled once sent (edits refused)
        self._edit_times: dict[str, list[float]] = {}

    # ---- scripting -----------------------------------------------------

    def rate_limit_next(self) -> None:
        with self._cond:
            self._limits += 1

    def event(
        self,
        *,
        chat_id: str,
        open_id: str,
        text: str,
        chat_type: str = "p2p",
        mention_bot: bool = False,
        event_id: str | None = None,
    ) -> dict[str, Any]:
        """An ``im.message.receive_v1`` event as Feishu posts it (schema 2.0)."""
        n = next(self._ids)
        mentions = (
            [{"key": "@_user_1", "id": {"open_id": BOT_OPEN_ID}, "name": "vikingbot"}]
            if mention_bot
            else []
        )
        content = json.dumps({"text": ("@_user_1 " if mention_bot else "") + text})
        return {
            "schema": "2.0",
            "header": {
                "event_id": event_id or f"ev-{n}",
                "event_type": "im.message.receive_v1",
                "create_time": str(int(time.time() * 1000)),
                "token": self.verification_token,
                "app_id": self.app_id,
                "tenant_key": "fake-tenant",
            },
            "event": {
                "sender": {
                    "sender_id": {"open_id": open_id},
                    "sender_type": "user",
                    "tenant_key": "fake-tenant",
                },
                "message": {
                    "message_id": f"om_{n}",
                    "create_time": str(int(time.time() * 1000)),
                    "chat_id": chat_id,
                    "chat_type": chat_type,
                    "message_type": "text",
                    "content": content,
                    "mentions": mentions,
                },
            },
        }

    def card_press(
        self, *, message: dict[str, Any], open_id: str, value: dict[str, Any]
    ) -> dict[str, Any]:
        """A ``card.action.trigger`` callback (schema 2.0) as Feishu posts it when
        ``open_id`` presses a button whose ``value`` is given, on ``message`` (a card the
        bot sent)."""
        n = next(self._ids)
        return {
            "schema": "2.0",
            "header": {
                "event_id": f"ev-card-{n}",
                "event_type": "card.action.trigger",
                "create_time": str(int(time.time() * 1000)),
                "token": self.verification_token,
                "app_id": self.app_id,
                "tenant_key": "fake-tenant",
            },
            "event": {
                "operator": {"tenant_key": "fake-tenant", "open_id": open_id},
                "token": f"c-{n}",
                "action": {"value": value, "tag": "button"},
                "host": "im_message",
                "context": {
                    "open_message_id": message["message_id"],
                    "open_chat_id": message["chat_id"],
                },
            },
        }

    async def push(self, url: str, event: dict[str, Any]) -> httpx.Response:
        """POST ``event`` to the bot's callback ``url``, as Feishu's event delivery."""
        chat = event.get("event", {}).get("message", {}).get("chat_id")
        if chat is not None:
            with self._cond:
                self.chats.add(str(chat))
        async with httpx.AsyncClient() as client:
            return await client.post(url, json=event, timeout=10)

    async def push_encrypted(
        self, url: str, event: dict[str, Any], encrypt_key: str, *, sign_with: str | None = None
    ) -> httpx.Response:
        """POST ``event`` as Feishu does with an Encrypt Key: ``{"encrypt": ...}`` (AES-256-CBC,
        the key's SHA-256, a random IV in front, PKCS#7, base64: what lark-oapi's
        ``AESCipher`` undoes) and signed (``X-Lark-Signature``: SHA-256 of timestamp, nonce,
        key and body). ``sign_with`` signs with another key (a forger's)."""
        body = json.dumps({"encrypt": encrypt(json.dumps(event), encrypt_key)}).encode()
        stamp, nonce = str(int(time.time())), secrets.token_hex(8)
        signed = (stamp + nonce + (sign_with or encrypt_key)).encode() + body
        headers = {
            "Content-Type": "application/json",
            "X-Lark-Request-Timestamp": stamp,
            "X-Lark-Request-Nonce": nonce,
            "X-Lark-Signature": hashlib.sha256(signed).hexdigest(),
        }
        async with httpx.AsyncClient() as client:
            return await client.post(url, content=body, headers=headers, timeout=10)

    def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("the fake Feishu never saw what the test waited for")
                self._cond.wait(left)

    async def wait_sent(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> list[dict[str, Any]]:
        await asyncio.to_thread(self._wait, lambda: len(self.sent) >= n, timeout)
        with self._cond:
            return list(self.sent)

    # ---- the Open Platform ---------------------------------------------

    @staticmethod
    def _answer(code: int, msg: str, status: int = 200, **data: Any) -> Response:
        from starlette.responses import JSONResponse

        return JSONResponse({"code": code, "msg": msg, **data}, status_code=status)

    async def _token(self, request: Request) -> Response:
        body = await request.json()
        if body.get("app_id") != self.app_id or body.get("app_secret") != self.app_secret:
            return self._answer(10014, "app secret invalid")
        return self._answer(0, "ok", tenant_access_token=self.tenant_token, expire=7200)

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.tenant_token}"

    async def _bot_info(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._answer(99991663, "Invalid access token for authorization.", 400)
        return self._answer(0, "ok", bot={"app_name": "vikingbot", "open_id": BOT_OPEN_ID})

    async def _create(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._answer(99991663, "Invalid access token for authorization.", 400)
        if request.query_params.get("receive_id_type") != "chat_id":
            return self._answer(99992402, "field validation failed", 400)
        body = await request.json()
        with self._cond:
            self.posts += 1
            if self._limits:
                self._limits -= 1
                return self._answer(RATE_LIMITED, "request trigger frequency limit", 429)
            chat, uuid = body.get("receive_id"), body.get("uuid")
            if chat not in self.chats:
                return self._answer(230002, "Bot/User can NOT be out of the chat.", 400)
            if len(str(body.get("content", "")).encode()) > MAX_POST_BYTES:
                return self._answer(230025, "The message content is too long.", 400)
            if uuid and uuid in self._by_uuid:
                return self._answer(0, "success", data=self._by_uuid[uuid])
            message = {
                "message_id": f"om_sent_{next(self._ids)}",
                "chat_id": chat,
                "msg_type": body.get("msg_type"),
                "body": {"content": body.get("content")},
                "uuid": uuid,
            }
            if uuid:
                self._by_uuid[uuid] = message
            self.created_at[message["message_id"]] = time.monotonic()
            self.sent.append(message)
            self._cond.notify_all()
        return self._answer(0, "success", data=message)

    async def _update(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._answer(99991663, "Invalid access token for authorization.", 400)
        mid = request.path_params["message_id"]
        body = await request.json()
        now = time.monotonic()
        with self._cond:
            found = next((m for m in self.sent if m["message_id"] == mid), None)
            if found is None or self.recalled:
                return self._answer(230011, "The message was withdrawn.", 400)
            if body.get("msg_type") not in ("text", "post"):
                return self._answer(230001, "msg_type must be text or post", 400)
            if len(str(body.get("content", "")).encode()) > MAX_POST_BYTES:
                return self._answer(230025, "The message content is too long.", 400)
            if len(found.get("was", [])) >= MAX_EDITS:
                return self._answer(230072, "The message has reached its edit limit.", 400)
            chat = found["chat_id"]
            recent = [t for t in self._edit_times.get(chat, []) if now - t < 1.0]
            if len(recent) >= self.edit_limit_per_s:
                self.refused_edits += 1
                return self._answer(RATE_LIMITED, "request trigger frequency limit", 429)
            self._edit_times[chat] = [*recent, now]
            found.setdefault("was", []).append(found["body"]["content"])
            found["body"] = {"content": body.get("content")}
            found["msg_type"] = body.get("msg_type")
            self.edits.append({"message_id": mid, "content": body.get("content"), "at": now})
            self._cond.notify_all()
            return self._answer(0, "success", data=found)

    def app(self) -> Starlette:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(
            routes=[
                Route(
                    "/open-apis/auth/v3/tenant_access_token/internal",
                    self._token,
                    methods=["POST"],
                ),
                Route("/open-apis/bot/v3/info", self._bot_info),
                Route("/open-apis/im/v1/messages", self._create, methods=["POST"]),
                Route("/open-apis/im/v1/messages/{message_id}", self._update, methods=["PUT"]),
                Route("/open-apis/im/v1/messages/{message_id}/resources/{key}", self._resource),
            ]
        )

    def file_event(
        self,
        *,
        chat_id: str,
        open_id: str,
        message_type: str,
        key: str,
        data: bytes,
        **content: Any,
    ) -> dict[str, Any]:
        """An ``image``/``audio``/``file`` message whose resource ``key`` serves ``data``."""
        event = self.event(chat_id=chat_id, open_id=open_id, text="")
        message = event["event"]["message"]
        message["message_type"] = message_type
        field = "image_key" if message_type == "image" else "file_key"
        message["content"] = json.dumps({field: key, **content})
        with self._cond:
            self.resources[(message["message_id"], key)] = data
        return event

    async def _resource(self, request: Request) -> Response:
        from starlette.responses import Response as Plain

        if not self._authorized(request):
            return self._answer(99991663, "Invalid access token for authorization.", 400)
        ident = (request.path_params["message_id"], request.path_params["key"])
        with self._cond:
            self.downloads.append((*ident, request.query_params.get("type", "")))
            data = self.resources.get(ident)
        if data is None:
            return self._answer(234003, "File not in msg.", 400)
        return Plain(data, headers={"Content-Disposition": 'attachment; filename="x.bin"'})

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Run the fake on a free loopback port; yields its base URL (the SDK's domain)."""
        from vikingbot.testing.server import serve_app

        with serve_app(self.app()) as base_url:
            yield base_url


def encrypt(plaintext: str, encrypt_key: str) -> str:
    """Feishu's event encryption (the inverse of ``lark_oapi``'s ``AESCipher.decrypt_str``)."""
    from Crypto.Cipher import AES

    data = plaintext.encode()
    pad = AES.block_size - len(data) % AES.block_size
    iv = secrets.token_bytes(AES.block_size)
    cipher = AES.new(hashlib.sha256(encrypt_key.encode()).digest(), AES.MODE_CBC, iv)
    return base64.b64encode(iv + cipher.encrypt(data + bytes([pad]) * pad)).decode()
