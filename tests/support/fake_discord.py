"""A fake Discord (REST API v10 and the gateway websocket) on loopback, for discord.py.

REST: ``GET /users/@me`` and ``/oauth2/applications/@me`` (401 for any other token),
``GET /gateway/bot`` (whose ``url`` is this fake's websocket) and
``POST /channels/{id}/messages`` with Discord's rules: content up to 2,000
characters (else 400, code 50035), ``nonce`` with ``enforce_nonce`` answered with
the message already created under that nonce, and a scripted 429 carrying
``retry_after`` (and the ``Via`` header Discord's edge adds). Unknown channels: 404,
code 10003. ``PATCH /channels/{id}/messages/{id}`` edits a created message in place
(what it showed before kept in ``was``; an unknown one: 404, code 10008, as all are
with ``all_deleted``;
more than :attr:`FakeDiscord.edit_limit_per_s` edits a second in one channel: 429).

Gateway: HELLO, IDENTIFY → READY, heartbeats acknowledged, frames compressed as
``zlib-stream`` like the real one, and ``MESSAGE_CREATE`` dispatches scripted by
:meth:`FakeDiscord.push_message`, sent to every open session as Discord does to a
bot connected twice (``sessions``: open now, ``most_sessions``: most at once).
Messages in a guild without the MESSAGE_CONTENT intent arrive with empty content
unless they mention the bot, as on Discord.

The server runs in another thread; every method here is thread-safe.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.websockets import WebSocket

WAIT_TIMEOUT_S = 10.0
MAX_CONTENT = 2000
MESSAGE_CONTENT_INTENT = 1 << 15
BOT_ID = "900000000000000001"


def _user(user_id: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": user_id,
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": None,
        "bot": bot,
    }


class FakeDiscord:
    def __init__(self, *, token: str = "fake-discord-bot-token") -> None:
        self.token = token
        self.bot = _user(BOT_ID, "vikingbot", bot=True)
        self.sent: list[dict[str, Any]] = []  # messages created by the bot
        self.posts = 0  # create-message requests, whatever their answer
        self.identified: list[dict[str, Any]] = []
        self.most_sessions = 0  # the most gateway sessions open (identified) at one moment
        self.channels: set[str] = set()  # known channel ids (others: 404)
        self._by_nonce: dict[tuple[str, str], dict[str, Any]] = {}
        self._limits: list[float] = []  # scripted 429s: retry_after of each
        self._cond = threading.Condition()
        self._sinks: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[dict[str, Any]]]] = []
        self._next_id = 1_000_000_000_000_000_000
        self.base_url = ""
        self.cdn: dict[str, bytes] = {}  # attachment id -> bytes (push_message files)
        self.downloads: list[str] = []  # attachment ids fetched from the CDN
        self.callbacks: list[dict[str, Any]] = []  # interaction responses (a press answered)
        self.commands: list[dict[str, Any]] = []  # the global application commands registered
        self.edits: list[dict[str, Any]] = []  # edits taken: channel, id, content, at
        self.refused_edits = 0  # edits answered 429
        self.edit_limit_per_s = 2
        self.all_deleted = False  # every message deleted once created (edits of it: 404)
        self._edit_times: dict[str, list[float]] = {}

    # ---- scripting (test side) ------------------------------------------

    def _snowflake(self) -> str:
        self._next_id += 1
        return str(self._next_id)

    def rate_limit_next(self, retry_after: float) -> None:
        """Answer the next create-message with 429 and this ``retry_after``."""
        with self._cond:
            self._limits.append(retry_after)

    def push_message(
        self,
        *,
        channel_id: str,
        user_id: str,
        text: str,
        guild_id: str | None = None,
        mention_bot: bool = False,
        files: list[tuple[str, str, bytes]] | None = None,
    ) -> None:
        """A person's message arrives on the gateway (a DM when ``guild_id`` is None),
        with ``files`` as (name, content type, bytes), served on its fake CDN."""
        with self._cond:
            self.channels.add(channel_id)
            attachments = []
            for name, mime, blob in files or []:
                ident = self._snowflake()
                self.cdn[ident] = blob
                url = f"{self.base_url}/attachments/{channel_id}/{ident}/{name}"
                attachments.append({"id": ident, "filename": name, "size": len(blob),
                                    "url": url, "proxy_url": url, "content_type": mime})  # fmt: skip
            data: dict[str, Any] = {
                "id": self._snowflake(),
                "channel_id": channel_id,
                "author": _user(user_id, f"user{user_id[-4:]}"),
                "content": text,
                "timestamp": "2026-12-04T12:00:00.000000+00:00",
                "edited_timestamp": None,
                "tts": False,
                "mention_everyone": False,
                "mentions": [self.bot] if mention_bot else [],
                "mention_roles": [],
                "attachments": attachments,
                "embeds": [],
                "pinned": False,
                "type": 0,
            }
            if guild_id is not None:
                data["guild_id"] = guild_id
                intents = self.identified[-1].get("intents", 0) if self.identified else 0
                if not mention_bot and not int(intents) & MESSAGE_CONTENT_INTENT:
                    data["content"] = ""
            sinks = list(self._sinks)
        for loop, queue in sinks:
            loop.call_soon_threadsafe(queue.put_nowait, {"op": 0, "t": "MESSAGE_CREATE", "d": data})

    def push_press(
        self, *, message: dict[str, Any], user_id: str, custom_id: str, guild_id: str | None = None
    ) -> str:
        """A person presses the button ``custom_id`` of ``message`` (one the bot sent): an
        ``INTERACTION_CREATE`` of type 3 (message component) on the gateway, as Discord
        sends it. Returns the interaction id (its response lands in :attr:`callbacks`)."""
        data = {"custom_id": custom_id, "component_type": 2}
        return self._interaction(3, data, message["channel_id"], user_id, guild_id, message)

    def push_command(
        self, *, channel_id: str, user_id: str, name: str, args: str | None = None,
        guild_id: str | None = None,
    ) -> str:  # fmt: skip
        """A person runs the slash command ``name`` (registered before) from the menu: an
        ``INTERACTION_CREATE`` of type 2 (application command), ``args`` its text option."""
        with self._cond:
            found = next((c for c in self.commands if c["name"] == name), None)
        if found is None:
            raise AssertionError(f"/{name} is not a registered application command")
        options = [] if args is None else [{"name": "args", "type": 3, "value": args}]
        data = {"id": found["id"], "name": name, "type": 1, "options": options}
        return self._interaction(2, data, channel_id, user_id, guild_id, None)

    def _interaction(
        self,
        kind: int,
        payload: dict[str, Any],
        channel_id: str,
        user_id: str,
        guild_id: str | None,
        message: dict[str, Any] | None,
    ) -> str:
        user = _user(user_id, f"user{user_id[-4:]}")
        with self._cond:
            self.channels.add(channel_id)
            ident = self._snowflake()
            data: dict[str, Any] = {
                "id": ident,
                "application_id": "900000000000000002",
                "type": kind,
                "token": f"itoken-{ident}",
                "version": 1,
                "channel_id": channel_id,
                "channel": {"id": channel_id, "type": 1 if guild_id is None else 0},
                "data": payload,
                "locale": "en-US",
                "app_permissions": "0",
                "attachment_size_limit": 10_485_760,
                "entitlements": [],
                "authorizing_integration_owners": {},
            }
            if message is not None:
                data["message"] = message
            if guild_id is None:
                data["user"] = user
            else:
                data["guild_id"] = guild_id
                data["channel"] = {**data["channel"], "guild_id": guild_id, "name": "general",
                                   "position": 0, "permission_overwrites": []}  # fmt: skip
                data["member"] = {"user": user, "roles": [], "joined_at": None, "deaf": False,
                                  "mute": False, "permissions": "0", "flags": 0}  # fmt: skip
            sinks = list(self._sinks)
        for loop, queue in sinks:
            loop.call_soon_threadsafe(
                queue.put_nowait, {"op": 0, "t": "INTERACTION_CREATE", "d": data}
            )
        return ident

    async def _put_commands(self, request: Request) -> Response:
        """``PUT /applications/{id}/commands``: the bot's global commands, all replaced."""
        from starlette.responses import JSONResponse

        if not self._authorized(request):
            return self._error(401, 0, "401: Unauthorized")
        body = await request.json()
        if not isinstance(body, list) or len(body) > 100:
            return self._error(400, 50035, "Invalid Form Body")
        made = []
        for item in body:
            name = item.get("name") if isinstance(item, dict) else None
            description = item.get("description") if isinstance(item, dict) else None
            if not isinstance(name, str) or not re.fullmatch(r"[-_a-z0-9]{1,32}", name):
                return self._error(400, 50035, "Invalid Form Body", errors={"name": name})
            if not isinstance(description, str) or not 1 <= len(description) <= 100:
                return self._error(400, 50035, "Invalid Form Body", errors={"description": 1})
            made.append({**item, "id": self._snowflake(), "version": "1",
                         "application_id": request.path_params["app_id"]})  # fmt: skip
        with self._cond:
            self.commands = made
            self._cond.notify_all()
        return JSONResponse(made)

    async def wait_callbacks(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self._wait, lambda: len(self.callbacks) >= n, timeout)

    async def _callback(self, request: Request) -> Response:
        """``POST /interactions/{id}/{token}/callback``: the bot answers a press."""
        from starlette.responses import JSONResponse

        ident, token = request.path_params["interaction_id"], request.path_params["token"]
        if token != f"itoken-{ident}":
            return self._error(401, 50027, "Invalid Webhook Token")
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, 50109, "The request body contains invalid JSON.")
        with self._cond:
            self.callbacks.append({"id": ident, **(body if isinstance(body, dict) else {})})
            self._cond.notify_all()
        kind = body.get("type") if isinstance(body, dict) else None
        return JSONResponse({"interaction": {"id": ident, "type": 3}, "resource": {"type": kind}})

    def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("the fake Discord never saw what the test waited for")
                self._cond.wait(left)

    async def wait_sent(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> list[dict[str, Any]]:
        await asyncio.to_thread(self._wait, lambda: len(self.sent) >= n, timeout)
        with self._cond:
            return list(self.sent)

    @property
    def sessions(self) -> int:
        """Gateway sessions open now (identified, not yet closed): each gets every event."""
        with self._cond:
            return len(self._sinks)

    async def wait_ready(self, timeout: float = WAIT_TIMEOUT_S) -> None:
        """Until a gateway session has identified and is listening."""
        await asyncio.to_thread(self._wait, lambda: bool(self._sinks), timeout)

    # ---- REST ----------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bot {self.token}"

    @staticmethod
    def _error(status: int, code: int, message: str, **extra: Any) -> Response:
        from starlette.responses import JSONResponse

        return JSONResponse({"code": code, "message": message, **extra}, status_code=status)

    async def _me(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._authorized(request):
            return self._error(401, 0, "401: Unauthorized")
        return JSONResponse(self.bot)

    async def _application(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._authorized(request):
            return self._error(401, 0, "401: Unauthorized")
        app = {
            "id": "900000000000000002",
            "name": "vikingbot",
            "description": "",
            "icon": None,
            "bot_public": False,
            "bot_require_code_grant": False,
            "owner": _user("900000000000000003", "owner"),
            "verify_key": "0" * 64,
            "flags": 0,
        }
        return JSONResponse(app)

    async def _gateway(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._authorized(request):
            return self._error(401, 0, "401: Unauthorized")
        ws = self.base_url.replace("http://", "ws://") + "/gateway"
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return JSONResponse({"url": ws, "shards": 1, "session_start_limit": limit})

    async def _create(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._authorized(request):
            return self._error(401, 0, "401: Unauthorized")
        channel = request.path_params["channel_id"]
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, 50109, "The request body contains invalid JSON.")
        content = body.get("content") if isinstance(body, dict) else None
        with self._cond:
            self.posts += 1
            self._cond.notify_all()
            if self._limits:
                retry = self._limits.pop(0)
                limited = {"message": "You are being rate limited.", "retry_after": retry}
                return JSONResponse(
                    {**limited, "global": False},
                    status_code=429,
                    headers={"Via": "1.1 google", "Retry-After": str(int(retry) + 1)},
                )
            if channel not in self.channels:
                return self._error(404, 10003, "Unknown Channel")
            if not isinstance(content, str) or not content:
                return self._error(400, 50006, "Cannot send an empty message")
            if len(content) > MAX_CONTENT:
                return self._error(
                    400,
                    50035,
                    "Invalid Form Body",
                    errors={"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}},
                )
            nonce = body.get("nonce")
            key = (channel, str(nonce))
            if nonce is not None and body.get("enforce_nonce") and key in self._by_nonce:
                return JSONResponse(self._by_nonce[key])
            message = {
                "id": self._snowflake(),
                "channel_id": channel,
                "author": self.bot,
                "content": content,
                "timestamp": "2026-12-04T12:00:01.000000+00:00",
                "edited_timestamp": None,
                "tts": False,
                "mention_everyone": False,
                "mentions": [],
                "mention_roles": [],
                "attachments": [],
                "embeds": [],
                "pinned": False,
                "type": 0,
                "nonce": nonce,
                "allowed_mentions": body.get("allowed_mentions"),
                "components": body.get("components") or [],
            }
            if nonce is not None:
                self._by_nonce[key] = message
            self.sent.append(message)
            self._cond.notify_all()
        return JSONResponse(message)

    async def _edit(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._authorized(request):
            return self._error(401, 0, "401: Unauthorized")
        channel, mid = request.path_params["channel_id"], request.path_params["message_id"]
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, 50109, "The request body contains invalid JSON.")
        content = body.get("content") if isinstance(body, dict) else None
        now = time.monotonic()
        with self._cond:
            found = next(
                (m for m in self.sent if m["channel_id"] == channel and m["id"] == mid), None
            )
            if found is None or self.all_deleted:
                return self._error(404, 10008, "Unknown Message")
            if not isinstance(content, str) or not content or len(content) > MAX_CONTENT:
                return self._error(400, 50035, "Invalid Form Body")
            recent = [t for t in self._edit_times.get(channel, []) if now - t < 1.0]
            if len(recent) >= self.edit_limit_per_s:
                self.refused_edits += 1
                limited = {"message": "You are being rate limited.", "retry_after": 1.0}
                return JSONResponse({**limited, "global": False}, status_code=429,
                                    headers={"Via": "1.1 google", "Retry-After": "1"})  # fmt: skip
            self._edit_times[channel] = [*recent, now]
            found.setdefault("was", []).append(found["content"])
            found["content"] = content
            found["edited_timestamp"] = "2026-12-04T12:00:02.000000+00:00"
            self.edits.append({"channel_id": channel, "id": mid, "content": content, "at": now})
            self._cond.notify_all()
            return JSONResponse(found)

    # ---- gateway -------------------------------------------------------

    async def _socket(self, websocket: WebSocket) -> None:
        from starlette.websockets import WebSocketDisconnect

        await websocket.accept()
        zlib_stream = websocket.query_params.get("compress") == "zlib-stream"
        packer = zlib.compressobj()
        sequence = 0

        async def send(payload: dict[str, Any]) -> None:
            nonlocal sequence
            if payload.get("op") == 0:
                sequence += 1
                payload = {**payload, "s": sequence}
            else:
                payload = {"s": None, "t": None, **payload}
            raw = json.dumps(payload).encode()
            if zlib_stream:
                await websocket.send_bytes(packer.compress(raw) + packer.flush(zlib.Z_SYNC_FLUSH))
            else:
                await websocket.send_text(raw.decode())

        await send({"op": 10, "d": {"heartbeat_interval": 41250}})
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        sink = (asyncio.get_running_loop(), queue)
        pump: asyncio.Task[None] | None = None

        async def forward() -> None:
            while True:
                await send(await queue.get())

        try:
            while True:
                frame = json.loads(await websocket.receive_text())
                op = frame.get("op")
                if op == 1:
                    await send({"op": 11})
                elif op == 2:
                    identify = frame.get("d") or {}
                    if identify.get("token") != self.token:
                        await websocket.close(code=4004)  # Authentication failed
                        return
                    ready = {
                        "v": 10,
                        "user": self.bot,
                        "guilds": [],
                        "session_id": "fake-session",
                        "resume_gateway_url": self.base_url.replace("http://", "ws://")
                        + "/gateway",
                        "application": {"id": "900000000000000002", "flags": 0},
                        "shard": [0, 1],
                    }
                    await send({"op": 0, "t": "READY", "d": ready})
                    with self._cond:
                        self.identified.append(identify)
                        self._sinks.append(sink)
                        self.most_sessions = max(self.most_sessions, len(self._sinks))
                        self._cond.notify_all()
                    pump = asyncio.create_task(forward())
        except WebSocketDisconnect:
            pass
        finally:
            if pump is not None:
                pump.cancel()
            with self._cond:
                if sink in self._sinks:
                    self._sinks.remove(sink)

    def app(self) -> Starlette:
        from starlette.applications import Starlette
        from starlette.routing import Route, WebSocketRoute

        return Starlette(
            routes=[
                Route("/api/v10/users/@me", self._me),
                Route("/api/v10/oauth2/applications/@me", self._application),
                Route("/api/v10/gateway/bot", self._gateway),
                Route("/api/v10/channels/{channel_id}/messages", self._create, methods=["POST"]),
                Route(
                    "/api/v10/channels/{channel_id}/messages/{message_id}",
                    self._edit,
                    methods=["PATCH"],
                ),
                Route(
                    "/api/v10/applications/{app_id}/commands", self._put_commands, methods=["PUT"]
                ),
                Route(
                    "/api/v10/interactions/{interaction_id}/{token}/callback",
                    self._callback,
                    methods=["POST"],
                ),
                WebSocketRoute("/gateway", self._socket),
                Route("/attachments/{channel}/{ident}/{name}", self._cdn),
            ]
        )

    async def _cdn(self, request: Request) -> Response:
        from starlette.responses import Response as Plain

        ident = request.path_params["ident"]
        with self._cond:
            self.downloads.append(ident)
            blob = self.cdn.get(ident)
        return Plain(blob) if blob is not None else Plain(status_code=404)

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Run the fake on a free loopback port; yields the API base (``.../api/v10``)."""
        from vikingbot.testing.server import serve_app

        with serve_app(self.app(), ws="websockets-sansio") as base_url:
            self.base_url = base_url
            yield f"{base_url}/api/v10"
