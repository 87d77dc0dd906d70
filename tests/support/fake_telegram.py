"""A fake Telegram Bot API on loopback, for driving python-telegram-bot in tests.

Implements ``/bot<token>/getMe``, ``getUpdates`` (scripted updates, then a long
poll that returns empty after at most ``max_poll_s``) and ``sendMessage``
(recorded; a scripted error can be answered instead, or the answer held as if the
bot died waiting for it: ``stall_next_send``)::

    fake = FakeTelegram()
    with fake.serve() as api_base:        # "http://127.0.0.1:PORT"
        ...TelegramSettings(api_base=api_base, token=fake.token)
        fake.push_text(chat_id=42, user_id=42, text="hi")
        sent = await fake.wait_sent(1)

The server runs in another thread; every method here is thread-safe.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from tests.support.stalls import Stalls

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

WAIT_TIMEOUT_S = 10.0
DATE = 1_700_000_000


# Telegram's HTML: these tags only (https://core.telegram.org/bots/api#html-style),
# each closed, and only &lt; &gt; &amp; &quot; and numeric entities.
TELEGRAM_TAGS = {
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a",
    "code", "pre", "blockquote", "tg-emoji",
}  # fmt: skip


def html_problem(text: str) -> str | None:
    """Why Telegram would refuse ``text`` as ``parse_mode=HTML``, or None."""
    import re
    from html.parser import HTMLParser

    bad = re.search(r"&(?!(?:lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);)", text)
    if bad:
        return f"unsupported entity at byte offset {bad.start()}"
    found: list[str] = []

    class Check(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag not in TELEGRAM_TAGS:
                found.append(f"unsupported start tag {tag!r}")
            stack.append(tag)

        def handle_endtag(self, tag: str) -> None:
            if not stack or stack.pop() != tag:
                found.append(f"can't find end tag corresponding to start tag {tag!r}")

    stack: list[str] = []
    checker = Check(convert_charrefs=True)
    checker.feed(text)
    checker.close()
    if stack:
        found.append(f"can't find end tag corresponding to start tag {stack[-1]!r}")
    return found[0] if found else None


class FakeTelegram:
    def __init__(
        self,
        *,
        token: str | None = None,
        username: str = "viking_fake_bot",
        max_poll_s: float = 0.5,
    ) -> None:
        # a token of its own by default: a gateway left over from another test that finds
        # this fake on a reused port is refused (401), not counted as a second poller
        self.token = token = token or f"{secrets.randbelow(10**9) + 10**8}:FAKE-token"
        self.username = username
        self.bot_id = int(token.split(":", 1)[0])
        self.max_poll_s = max_poll_s
        self.updates: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []  # setMyCommands, sendChatAction...
        self.edit_times: list[float] = []
        self.by_id: dict[int, dict[str, Any]] = {}  # sent messages by message id (edits)
        self.edit_limit_per_s = 3  # edits a second before a 429 (Telegram's flood control)
        self.polls = 0
        self.confirmed = 0  # the highest getUpdates offset seen (updates below are gone)
        self.polling = 0  # getUpdates requests in flight right now
        self._polls_open: set[Request] = set()  # those requests, to ask whether they hung up
        self.overlaps = 0  # getUpdates begun while another was in flight (answered 409)
        self.send_errors: list[tuple[int, str, int | None]] = []  # (code, description, retry_after)
        self.files: dict[str, bytes] = {}  # file_id -> bytes (push_file)
        self.downloads: list[str] = []  # file ids fetched (getFile), in order
        self._cond = threading.Condition()
        self._next_update = 1
        self._next_message = 1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._closing = False
        self.stalls = Stalls(self._cond, lambda: self._closing)

    # ---- scripting (test side) ------------------------------------------

    def stall_next_send(self, *, take: bool = True, skip: int = 0) -> None:
        """Hold the answer to the next ``sendMessage`` (after letting ``skip`` by) until
        :meth:`release`, the bot hangs up or the server stops: the bot's process dies
        waiting for it. ``take``: the message is in the chat (recorded) first, or it
        never got there."""
        self.stalls.add(take=take, skip=skip)

    def release(self) -> None:
        """Answer every held send now (and those stalled later at once)."""
        self.stalls.release()

    @property
    def stalled(self) -> int:
        """Sends whose answer is being held right now or was."""
        return self.stalls.stalled

    async def wait_stalled(self, n: int = 1, timeout: float = WAIT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self._wait, lambda: self.stalls.stalled >= n, timeout)

    def push_text(
        self,
        *,
        chat_id: int,
        user_id: int,
        text: str,
        thread: int | None = None,
        chat_type: str = "private",
        is_bot: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> int:
        """Script a text message from a person; returns its update id."""
        with self._cond:
            update_id = self._next_update
            self._next_update += 1
            message: dict[str, Any] = {
                "message_id": 1000 + update_id,
                "date": DATE + update_id,
                "chat": {"id": chat_id, "type": chat_type},
                "from": {"id": user_id, "is_bot": is_bot, "first_name": f"user{user_id}"},
                **({"text": text} if text or not extra else {}),
                **(extra or {}),
            }
            if thread is not None:
                message["message_thread_id"] = thread
                message["is_topic_message"] = True
                message["chat"]["is_forum"] = True
            self.updates.append({"update_id": update_id, "message": message})
            loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._wake)
        return update_id

    def push_file(
        self,
        *,
        chat_id: int,
        user_id: int,
        kind: str,
        data: bytes,
        caption: str | None = None,
        file_name: str | None = None,
        mime: str | None = None,
        declared_size: int | None = None,
    ) -> int:
        """Script a ``photo``, ``voice``, ``audio`` or ``document`` message (its bytes kept
        for ``getFile`` and the file download); returns its update id."""
        with self._cond:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = data
            size = len(data) if declared_size is None else declared_size
            ref = {"file_id": file_id, "file_unique_id": "u" + file_id, "file_size": size}
            media: dict[str, Any] = {
                "photo": [dict(ref, width=90, height=60), dict(ref, width=1280, height=960)],
                "voice": dict(ref, duration=3, mime_type="audio/ogg"),
                "audio": dict(ref, duration=3, file_name=file_name, mime_type=mime),
                "document": dict(ref, file_name=file_name, mime_type=mime),
            }
            if kind == "photo":  # the small size is another file, never the one fetched
                media["photo"][0]["file_id"] = "thumb-" + file_id
            extra: dict[str, Any] = {kind: media[kind]}
            if caption is not None:
                extra["caption"] = caption
        return self.push_text(chat_id=chat_id, user_id=user_id, text="", extra=extra)

    def push_press(
        self, *, chat_id: int, user_id: int, data: str, chat_type: str = "private"
    ) -> int:
        """Script a press of an inline button carrying ``data``; returns its update id."""
        with self._cond:
            update_id = self._next_update
            self._next_update += 1
            self.updates.append(
                {
                    "update_id": update_id,
                    "callback_query": {
                        "id": f"cq{update_id}",
                        "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
                        "chat_instance": "ci",
                        "data": data,
                        "message": {
                            "message_id": 1,
                            "date": DATE,
                            "chat": {"id": chat_id, "type": chat_type},
                            "from": {"id": self.bot_id, "is_bot": True, "first_name": "Viking"},
                            "text": "Allow?",
                        },
                    },
                }
            )
            loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._wake)
        return update_id

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        """The recorded ``setMyCommands`` / ``sendChatAction`` / ``answerCallbackQuery`` calls."""
        with self._cond:
            return [params for m, params in self.calls if m == method]

    async def wait_call(self, method: str, n: int = 1, timeout: float = WAIT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self._wait, lambda: len(self.calls_of(method)) >= n, timeout)

    def _record_call(self, method: str, params: dict[str, Any]) -> Response:
        with self._cond:
            if self.send_errors and method == "setMyCommands":
                code, description, retry_after = self.send_errors.pop(0)
                return self._fail(code, description, retry_after)
            self.calls.append((method, params))
            self._cond.notify_all()
        return self._ok(True)

    def _edit_message(self, params: dict[str, Any]) -> Response:
        """``editMessageText``: the message's text replaced (at most ``edit_limit_per_s``
        edits a second per chat, else 429 as Telegram's flood control answers)."""
        mid, text = int(params.get("message_id") or 0), str(params.get("text") or "")
        if params.get("parse_mode") == "HTML" and html_problem(text):
            return self._fail(400, "Bad Request: can't parse entities")
        with self._cond:
            found = self.by_id.get(mid)
            if found is None:
                return self._fail(400, "Bad Request: message to edit not found")
            if found["text"] == text and found.get("parse_mode") == params.get("parse_mode"):
                return self._fail(400, "Bad Request: message is not modified")
            now = time.monotonic()
            recent = [t for t in self.edit_times if now - t < 1.0]
            if len(recent) >= self.edit_limit_per_s:
                return self._fail(429, "Too Many Requests: retry after 1", 1)
            self.edit_times = [*recent, now]
            found.setdefault("was", []).append(found["text"])  # what it showed before
            found.update(text=text, parse_mode=params.get("parse_mode"))
            found["edits"] = found.get("edits", 0) + 1
            self.calls.append(("editMessageText", params))
            self._cond.notify_all()
        return self._ok(
            {"message_id": mid, "date": DATE, "chat": {"id": 0, "type": "private"}, "text": text}
        )

    def fail_next_send(
        self, code: int = 429, description: str = "Too Many Requests", retry_after: int | None = 0
    ) -> None:
        """Answer the next ``sendMessage`` with an API error instead of taking it."""
        with self._cond:
            self.send_errors.append((code, description, retry_after if code == 429 else None))

    def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        from vikingbot.testing.server import wait_until

        wait_until(self._cond, ready, timeout, "fake Telegram")

    def wait_for_sent(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> list[dict[str, Any]]:
        self._wait(lambda: len(self.sent) >= n, timeout)
        with self._cond:
            return list(self.sent)

    async def wait_sent(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.wait_for_sent, n, timeout)

    async def wait_polls(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self._wait, lambda: self.polls >= n, timeout)

    # ---- the server -----------------------------------------------------

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
        self._changed = asyncio.Event()

    @staticmethod
    def _ok(result: Any) -> Response:
        from starlette.responses import JSONResponse

        return JSONResponse({"ok": True, "result": result})

    @staticmethod
    def _fail(code: int, description: str, retry_after: int | None = None) -> Response:
        from starlette.responses import JSONResponse

        body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
        if retry_after is not None:
            body["parameters"] = {"retry_after": retry_after}
        return JSONResponse(body, status_code=code)

    @staticmethod
    async def _params(request: Request) -> dict[str, Any]:
        body = await request.body()
        if request.headers.get("content-type", "").startswith("application/json"):
            data = json.loads(body or b"{}")
            return data if isinstance(data, dict) else {}
        return dict(parse_qsl(body.decode()))

    async def _method(self, request: Request) -> Response:
        token = request.path_params["token"]
        method = request.path_params["method"]
        if token != self.token:
            return self._fail(401, "Unauthorized")
        from starlette.requests import ClientDisconnect
        from starlette.responses import Response as Plain

        try:
            params = await self._params(request)
        except ClientDisconnect:  # the bot went away mid-request (a killed gateway)
            return Plain(status_code=499)
        if method == "getMe":
            return self._ok(
                {
                    "id": self.bot_id,
                    "is_bot": True,
                    "first_name": "Viking",
                    "username": self.username,
                }
            )
        if method == "getUpdates":
            return await self._get_updates_once(params, request)
        if method == "sendMessage":
            with self._cond:
                stall = self.stalls.next()
            if stall is False:  # lost on the way: the chat never gets it
                await self.stalls.hold(request)
                return self._fail(504, "Gateway Timeout")
            answer = self._send_message(params)
            if stall:
                await self.stalls.hold(request)
            return answer
        if method == "getFile":
            file_id = str(params.get("file_id", ""))
            with self._cond:
                self.downloads.append(file_id)
                known = file_id in self.files
            if not known:
                return self._fail(400, "Bad Request: invalid file_id")
            size = len(self.files[file_id])
            path = f"documents/{file_id}"
            return self._ok({"file_id": file_id, "file_unique_id": "u", "file_size": size,
                             "file_path": path})  # fmt: skip
        if method in ("deleteWebhook", "close", "logOut"):
            return self._ok(True)
        if method in ("setMyCommands", "sendChatAction", "answerCallbackQuery"):
            return self._record_call(method, params)
        if method == "editMessageText":
            return self._edit_message(params)
        return self._fail(404, "Not Found: method not found")

    def _pending(self, offset: int) -> list[dict[str, Any]]:
        """Updates from ``offset`` on. Like Telegram, an offset confirms (and forgets)
        every update before it: a later call without an offset does not get them."""
        with self._cond:
            self.confirmed = max(self.confirmed, offset)
            return [u for u in self.updates if u["update_id"] >= self.confirmed]

    async def _get_updates_once(self, params: dict[str, Any], request: Request) -> Response:
        """Like Telegram: a second concurrent consumer gets 409 Conflict.

        A request whose client hung up (its process stopped or was killed) is no
        consumer: those still open are asked first, so a poll that ends the moment its
        gateway stops is not counted as a second poller beside the next one (the
        server's own loop only notices a hang-up the next time it looks)."""
        with self._cond:
            open_before = list(self._polls_open)
        gone = [r for r in open_before if await r.is_disconnected()]
        with self._cond:
            live = len(self._polls_open.difference(gone))
            overlap = live > 0
            self.overlaps += overlap
            self.polling += 1
            self._polls_open.add(request)
        try:
            if overlap:
                with self._cond:
                    self.polls += 1
                    self._cond.notify_all()
                return self._fail(409, "Conflict: terminated by other getUpdates request")
            return self._ok(await self._get_updates(params, request))
        finally:
            with self._cond:
                self.polling -= 1
                self._polls_open.discard(request)
                self._cond.notify_all()

    async def _get_updates(
        self, params: dict[str, Any], request: Request | None = None
    ) -> list[dict[str, Any]]:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._changed = asyncio.Event()
        with self._cond:
            self.polls += 1
            self._cond.notify_all()
        offset = int(params.get("offset") or 0)
        wait = min(float(params.get("timeout") or 0), self.max_poll_s)
        deadline = time.monotonic() + wait
        while True:
            changed = self._changed
            found = self._pending(offset)
            left = deadline - time.monotonic()
            if found or left <= 0 or changed is None or self._closing:
                return found
            if request is not None and await request.is_disconnected():
                return []  # the poller went away (stopped, or its process was killed)
            with suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), min(left, 0.05))

    def _send_message(self, params: dict[str, Any]) -> Response:
        chat, text = params.get("chat_id"), params.get("text")
        if not text:
            return self._fail(400, "Bad Request: message text is empty")
        mode = params.get("parse_mode")
        if mode == "HTML":
            problem = html_problem(str(text))
            if problem:
                return self._fail(400, f"Bad Request: can't parse entities: {problem}")
        elif mode:
            return self._fail(400, f"Bad Request: unsupported parse_mode {mode!r} in this fake")
        if not chat:
            return self._fail(400, "Bad Request: chat not found")
        with self._cond:
            if self.send_errors:
                code, description, retry_after = self.send_errors.pop(0)
                return self._fail(code, description, retry_after)
            message_id = self._next_message
            self._next_message += 1
            thread = params.get("message_thread_id")
            row = {
                "chat_id": str(chat),
                "text": text,
                "message_thread_id": str(thread) if thread else None,
                "parse_mode": mode,
            }
            if params.get("reply_markup"):  # buttons: only asked-for questions carry them
                markup = params["reply_markup"]
                row["reply_markup"] = json.loads(markup) if isinstance(markup, str) else markup
            self.sent.append(row)
            self.by_id[message_id] = row
            self._cond.notify_all()
        chat_id = int(chat) if str(chat).lstrip("-").isdigit() else 0
        return self._ok(
            {
                "message_id": message_id,
                "date": DATE,
                "chat": {"id": chat_id, "type": "private"},
                "from": {"id": self.bot_id, "is_bot": True, "first_name": "Viking"},
                "text": text,
            }
        )

    def app(self) -> Starlette:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(
            routes=[
                Route("/bot{token}/{method}", self._method, methods=["GET", "POST"]),
                Route("/file/bot{token}/documents/{file_id}", self._download, methods=["GET"]),
            ]
        )

    async def _download(self, request: Request) -> Response:
        from starlette.responses import Response as Plain

        if request.path_params["token"] != self.token:
            return self._fail(401, "Unauthorized")
        data = self.files.get(request.path_params["file_id"])
        return (
            Plain(data, media_type="application/octet-stream") if data else Plain(status_code=404)
        )

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Run the fake on a free loopback port; yields the API base for ``api_base``."""
        from vikingbot.testing.server import serve_app

        self._closing = False
        self._loop = self._changed = None
        with serve_app(self.app()) as base_url:
            try:
                yield base_url
            finally:
                self._closing = True  # end open long polls so the server stops at once
                if self._loop is not None:
                    self._loop.call_soon_threadsafe(self._wake)
