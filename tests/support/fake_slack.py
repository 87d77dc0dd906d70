"""A fake Slack API on loopback, for driving the real ``slack_sdk`` code paths in tests.

It implements ``auth.test``, ``apps.connections.open`` (returning a
``ws://127.0.0.1:<port>/socket`` URL), the Socket Mode websocket (it sends
``hello``, then every scripted envelope, and records the acks),
``chat.postMessage`` (recorded with its metadata; a scripted error can be
answered instead, or the answer held as if the bot died waiting for it),
``chat.update`` (the post edited in place, what it showed before kept in ``was``;
more than :attr:`FakeSlack.update_limit_per_s` updates a second in one channel are
answered ``ratelimited``, as Slack does) and
``conversations.history`` / ``conversations.replies`` over the recorded posts::

    fake = FakeSlack()
    with fake.serve() as api_base:          # "http://127.0.0.1:PORT/api/"
        ...SlackSettings(api_base=api_base, bot_token=fake.bot_token, app_token=fake.app_token)
        fake.push_message(user="U1", channel="D1", text="hi")
        posts = await fake.wait_posts(1)

The server runs in another thread; every method here is thread-safe.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tests.support.stalls import Stalls

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.websockets import WebSocket

WAIT_TIMEOUT_S = 10.0


class FakeSlack:
    def __init__(
        self,
        *,
        bot_token: str = "xoxb-fake-bot-token",
        app_token: str = "xapp-fake-app-token",
        bot_user_id: str = "UBOT",
        team_id: str = "T0FAKE",
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.bot_user_id = bot_user_id
        self.team_id = team_id
        self.posts: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}  # name -> bytes on the fake file host (add_file)
        self.downloads: list[tuple[str, str]] = []  # (file name, Authorization) fetched
        self.acks: list[str] = []
        self.connections = 0
        self.post_errors: list[tuple[int, str]] = []  # (HTTP status, Slack error) for next posts
        self._cond = threading.Condition()
        self._backlog: list[dict[str, Any]] = []
        self._sinks: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[dict[str, Any]]]] = []
        self._ids = itertools.count(1)
        self.base_url = ""
        self.history_calls = 0
        self._last_ts = 0.0
        self._closing = False
        self.stalls = Stalls(self._cond, lambda: self._closing)
        self.updates: list[dict[str, Any]] = []  # chat.update calls taken (channel, ts, text)
        self.refused_updates = 0  # chat.update answered ratelimited
        self.update_limit_per_s = 2  # updates a second per channel before ratelimited
        self._update_times: dict[str, list[float]] = {}
        self.update_error: str | None = None  # every chat.update answered with this error

    # ---- scripting (test side) ------------------------------------------

    def push_envelope(self, envelope: dict[str, Any]) -> None:
        """Send a raw Socket Mode envelope on the live connection (or the next one)."""
        with self._cond:
            if self._sinks:
                loop, queue = self._sinks[-1]
                loop.call_soon_threadsafe(queue.put_nowait, envelope)
            else:
                self._backlog.append(envelope)

    def push_message(
        self,
        *,
        user: str,
        channel: str,
        text: str,
        thread_ts: str | None = None,
        channel_type: str = "im",
        **extra: Any,
    ) -> str:
        """Script an ``events_api`` envelope carrying a ``message`` event; its envelope id."""
        n = next(self._ids)
        event: dict[str, Any] = {
            "type": "message",
            "user": user,
            "channel": channel,
            "text": text,
            "ts": f"1700000000.{n:06d}",
            "channel_type": channel_type,
            **extra,
        }
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        envelope_id = f"env-{n}"
        self.push_envelope(
            {
                "type": "events_api",
                "envelope_id": envelope_id,
                "accepts_response_payload": False,
                "retry_attempt": 0,
                "payload": {
                    "type": "event_callback",
                    "team_id": self.team_id,
                    "event_id": f"Ev{n:06d}",
                    "event": event,
                },
            }
        )
        return envelope_id

    def push_slash(self, *, user: str, channel: str, command: str, text: str = "") -> str:
        """Script a ``slash_commands`` envelope (a registered slash command typed)."""
        envelope_id = f"env-slash-{next(self._ids)}"
        payload = {"command": command, "text": text, "user_id": user, "channel_id": channel}
        self.push_envelope(
            {"type": "slash_commands", "envelope_id": envelope_id, "payload": payload}
        )
        return envelope_id

    def push_press(self, *, user: str, channel: str, value: str) -> str:
        """Script an ``interactive`` envelope: a Block Kit button carrying ``value`` pressed."""
        envelope_id = f"env-press-{next(self._ids)}"
        payload = {
            "type": "block_actions",
            "user": {"id": user},
            "channel": {"id": channel},
            "message": {"ts": "1.0"},
            "actions": [{"type": "button", "action_id": "a", "value": value}],
        }
        self.push_envelope({"type": "interactive", "envelope_id": envelope_id, "payload": payload})
        return envelope_id

    def fail_next_post(self, error: str = "ratelimited", status: int | None = None) -> None:
        """Answer the next ``chat.postMessage`` with a Slack error instead of taking it."""
        with self._cond:
            self.post_errors.append((status or (429 if error == "ratelimited" else 200), error))

    def stall_next_post(self, *, take: bool = True, skip: int = 0) -> None:
        """Hold the answer to the next ``chat.postMessage`` (after letting ``skip`` by)
        until :meth:`release`, the bot hangs up or the server stops: the bot's process
        dies waiting for it. ``take``: the message is in the chat (recorded) first, or
        it never got there."""
        self.stalls.add(take=take, skip=skip)

    def release(self) -> None:
        """Answer every held post now (and those stalled later at once)."""
        self.stalls.release()

    @property
    def stalled(self) -> int:
        """Posts whose answer is being held right now or was."""
        return self.stalls.stalled

    async def wait_stalled(self, n: int = 1, timeout: float = WAIT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self._wait, lambda: self.stalls.stalled >= n, timeout)

    def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        from vikingbot.testing.server import wait_until

        wait_until(self._cond, ready, timeout, "fake Slack")

    def wait_for_posts(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> list[dict[str, Any]]:
        self._wait(lambda: len(self.posts) >= n, timeout)
        with self._cond:
            return list(self.posts)

    async def wait_posts(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.wait_for_posts, n, timeout)

    async def wait_acks(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> list[str]:
        await asyncio.to_thread(self._wait, lambda: len(self.acks) >= n, timeout)
        with self._cond:
            return list(self.acks)

    async def wait_connected(self, timeout: float = WAIT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self._wait, lambda: bool(self._sinks), timeout)

    # ---- the server -----------------------------------------------------

    def _auth(self, request: Request, token: str) -> bool:
        return request.headers.get("authorization", "") == f"Bearer {token}"

    @staticmethod
    def _error(error: str, status: int = 200) -> Response:
        from starlette.responses import JSONResponse

        headers = {"Retry-After": "0"} if error == "ratelimited" else None
        return JSONResponse({"ok": False, "error": error}, status_code=status, headers=headers)

    async def _auth_test(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._auth(request, self.bot_token):
            return self._error("invalid_auth")
        return JSONResponse(
            {
                "ok": True,
                "url": "https://fake.slack.test/",
                "team": "Fake",
                "user": "vikingbot",
                "team_id": self.team_id,
                "user_id": self.bot_user_id,
                "bot_id": "BFAKE",
            }
        )

    async def _connections_open(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._auth(request, self.app_token):
            return self._error("invalid_auth")
        ws_base = self.base_url.replace("http://", "ws://", 1)
        return JSONResponse({"ok": True, "url": f"{ws_base}/socket?ticket=fake"})

    async def _post_message(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._auth(request, self.bot_token):
            return self._error("invalid_auth")
        body = await request.body()
        ctype = request.headers.get("content-type", "")
        if ctype.startswith("application/json"):
            data = json.loads(body or b"{}")
        else:
            from urllib.parse import parse_qsl

            data = dict(parse_qsl(body.decode()))
        channel, text = data.get("channel"), data.get("text")
        if not channel:
            return self._error("channel_not_found")
        if not text:
            return self._error("no_text")
        metadata = data.get("metadata")
        if isinstance(metadata, str):  # form-encoded: a JSON string
            metadata = json.loads(metadata)
        with self._cond:
            if self.post_errors:
                status, error = self.post_errors.pop(0)
                return self._error(error, status)
            stall = self.stalls.next()
        if stall is False:  # lost on the way: the chat never gets it
            await self.stalls.hold(request)
            return self._error("request_timeout", 504)
        with self._cond:
            self._last_ts = max(time.time(), self._last_ts + 0.000001)  # real and unique
            ts = f"{self._last_ts:.6f}"
            post = {
                "channel": channel,
                "text": text,
                "thread_ts": data.get("thread_ts"),
                "ts": ts,
                "metadata": metadata,
            }
            if data.get("blocks"):  # Block Kit (approval buttons)
                blocks = data["blocks"]
                post["blocks"] = json.loads(blocks) if isinstance(blocks, str) else blocks
            self.posts.append(post)
            self._cond.notify_all()
        if stall:
            await self.stalls.hold(request)
        return JSONResponse({"ok": True, "channel": channel, "ts": ts})

    async def _update(self, request: Request) -> Response:
        """``chat.update``: the recorded post's text (and metadata) replaced."""
        from starlette.responses import JSONResponse

        if not self._auth(request, self.bot_token):
            return self._error("invalid_auth")
        data = await self._form(request)
        channel, ts, text = data.get("channel"), data.get("ts"), data.get("text")
        metadata = data.get("metadata")
        if isinstance(metadata, str):
            metadata = json.loads(metadata)
        now = time.monotonic()
        with self._cond:
            found = next((p for p in self.posts if p["channel"] == channel and p["ts"] == ts), None)
            if found is None or self.update_error == "message_not_found":
                return self._error("message_not_found")
            if self.update_error is not None:
                return self._error(self.update_error)
            if not text:
                return self._error("no_text")
            recent = [t for t in self._update_times.get(channel, []) if now - t < 1.0]
            if len(recent) >= self.update_limit_per_s:
                self.refused_updates += 1
                return self._error("ratelimited", 429)
            self._update_times[channel] = [*recent, now]
            found.setdefault("was", []).append(found["text"])
            found["text"] = text
            if metadata is not None:
                found["metadata"] = metadata
            self.updates.append({"channel": channel, "ts": ts, "text": text, "at": now})
            self._cond.notify_all()
        return JSONResponse({"ok": True, "channel": channel, "ts": ts, "text": text})

    @staticmethod
    async def _form(request: Request) -> dict[str, Any]:
        body = await request.body()
        if request.headers.get("content-type", "").startswith("application/json"):
            data = json.loads(body or b"{}")
            return data if isinstance(data, dict) else {}
        from urllib.parse import parse_qsl

        return dict(parse_qsl(body.decode()))

    async def _history(self, request: Request) -> Response:
        """``conversations.history`` (top-level messages, newest first) and, at
        ``/replies``, ``conversations.replies`` (a thread, oldest first), one page."""
        from starlette.responses import JSONResponse

        if not self._auth(request, self.bot_token):
            return self._error("invalid_auth")
        params = dict(request.query_params)
        if request.method == "POST":
            from urllib.parse import parse_qsl

            params.update(parse_qsl((await request.body()).decode()))
        channel = params.get("channel")
        if not channel:
            return self._error("channel_not_found")
        oldest = float(params.get("oldest") or 0)
        metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
        thread = params.get("ts") if request.url.path.endswith("replies") else None
        with self._cond:
            self.history_calls += 1
            posts = [p for p in self.posts if p["channel"] == channel]
        if thread is None:
            found = [p for p in posts if not p["thread_ts"]][::-1]
        else:
            found = [p for p in posts if thread in (p["ts"], p["thread_ts"])]
        messages = []
        for p in found:
            if float(p["ts"]) <= oldest:
                continue
            m: dict[str, Any] = {
                "type": "message",
                "user": self.bot_user_id,
                "bot_id": "BFAKE",
                "text": p["text"],
                "ts": p["ts"],
            }
            if p["thread_ts"]:
                m["thread_ts"] = p["thread_ts"]
            if metadata and p.get("metadata"):
                m["metadata"] = p["metadata"]
            messages.append(m)
        return JSONResponse(
            {
                "ok": True,
                "messages": messages,
                "has_more": False,
                "response_metadata": {"next_cursor": ""},
            }
        )

    async def _socket(self, websocket: WebSocket) -> None:
        from starlette.websockets import WebSocketDisconnect

        await websocket.accept()
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        sink = (loop, queue)
        with self._cond:
            for envelope in self._backlog:
                queue.put_nowait(envelope)
            self._backlog.clear()
            self._sinks.append(sink)
            self.connections += 1
            self._cond.notify_all()

        async def pump() -> None:
            await websocket.send_json(
                {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "AFAKE"}}
            )
            while True:
                await websocket.send_json(await queue.get())

        sender = asyncio.create_task(pump())
        try:
            while True:
                data = json.loads(await websocket.receive_text())
                if isinstance(data, dict) and "envelope_id" in data:
                    with self._cond:
                        self.acks.append(str(data["envelope_id"]))
                        self._cond.notify_all()
        except WebSocketDisconnect:
            pass
        finally:
            sender.cancel()
            with self._cond:
                self._sinks.remove(sink)

    def app(self) -> Starlette:
        from starlette.applications import Starlette
        from starlette.routing import Route, WebSocketRoute

        return Starlette(
            routes=[
                Route("/api/auth.test", self._auth_test, methods=["POST"]),
                Route("/api/apps.connections.open", self._connections_open, methods=["POST"]),
                Route("/api/chat.postMessage", self._post_message, methods=["POST"]),
                Route("/api/chat.update", self._update, methods=["POST"]),
                Route("/api/conversations.history", self._history, methods=["GET", "POST"]),
                Route("/api/conversations.replies", self._history, methods=["GET", "POST"]),
                WebSocketRoute("/socket", self._socket),
                Route("/files-pri/{name}", self._file),
            ]
        )

    def add_file(self, name: str, data: bytes, mimetype: str) -> dict[str, Any]:
        """A file on the fake's file host; the ``files`` entry of a ``file_share`` event."""
        with self._cond:
            self.files[name] = data
        url = f"{self.base_url}/files-pri/{name}"
        return {"id": "F" + name, "name": name, "mimetype": mimetype, "size": len(data),
                "url_private": url, "url_private_download": url}  # fmt: skip

    async def _file(self, request: Request) -> Response:
        from starlette.responses import Response as Plain

        name = request.path_params["name"]
        with self._cond:
            self.downloads.append((name, request.headers.get("authorization", "")))
            data = self.files.get(name)
        return Plain(data) if data is not None else Plain(status_code=404)

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Run the fake on a free loopback port; yields the API base (``.../api/``)."""
        from vikingbot.testing.server import serve_app

        self._closing = False
        with serve_app(self.app(), ws="websockets-sansio") as base_url:
            self.base_url = base_url
            try:
                yield f"{base_url}/api/"
            finally:
                self._closing = True  # held posts answer, so the server can stop
