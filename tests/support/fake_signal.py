"""A fake signal-cli HTTP daemon (``signal-cli -a NUMBER daemon --http``) on loopback.

Built from signal-cli's documented protocol (its ``signal-cli-jsonrpc(5)`` page):
``GET /api/v1/check``; ``POST /api/v1/rpc`` with one JSON-RPC request (``send``,
``sendTyping``, ``sendReceipt``, ``getUserStatus``, ``getAttachment`` (base64); ``listAccounts`` only when the
daemon serves several accounts, else "Method not implemented" as a single-account
daemon answers); ``GET /api/v1/events``, a server-sent event stream of ``receive``
events whose data is ``{"envelope": ..., "account": ...}``, each with an id
``<start>-<n>``. The last ``BUFFER`` events are kept: a client reconnecting with a
``Last-Event-ID`` first gets the kept events after it, or all kept events when the
id is unknown; a client without one gets only new events. Keep-alive comments are
sent as the daemon does.

The server runs in another thread; the scripting methods are thread-safe.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

BOT = "+4915100000001"
BOT_UUID = "00000000-0000-4000-8000-000000000001"
BUFFER = 1000
WAIT_TIMEOUT_S = 15.0


class FakeSignal:
    def __init__(self, *, account: str = BOT, multi_account: bool = False) -> None:
        self.account = account
        self.multi_account = multi_account
        self.sent: list[dict[str, Any]] = []  # send params, in order
        self.typing: list[dict[str, Any]] = []
        self.receipts: list[dict[str, Any]] = []
        self.streams = 0  # event streams open now
        self.most_streams = 0
        self.send_results: list[str] = []  # scripted result types for the next sends
        self.attachments: dict[str, bytes] = {}  # id -> content, for getAttachment
        self.downloads: list[str] = []  # getAttachment ids asked for
        self._events: list[tuple[int, str]] = []
        self._prefix = f"{int(time.time() * 1000)}-"
        self._seq = 0
        self._cond = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._closing = False
        self._clock_ms = int(time.time() * 1000)

    # ---- scripting (test side) ------------------------------------------

    def push_text(
        self,
        text: str,
        *,
        number: str | None = "+4915100000002",
        uuid: str | None = "00000000-0000-4000-8000-000000000002",
        group: str | None = None,
        mention_bot: bool = False,
        timestamp: int | None = None,
        files: tuple[tuple[str, str, bytes], ...] = (),
    ) -> int:
        """Script a message from a person (``files``: name, type, bytes of each
        attachment, kept for ``getAttachment``); returns its timestamp."""
        with self._cond:
            self._clock_ms += 1
            ts = timestamp if timestamp is not None else self._clock_ms
            data: dict[str, Any] = {"timestamp": ts, "message": text, "expiresInSeconds": 0}
            if files:
                data["attachments"] = []
                for name, mime, content in files:
                    ident = f"att{len(self.attachments) + 1}"
                    self.attachments[ident] = content
                    data["attachments"].append(
                        {"contentType": mime, "filename": name, "id": ident, "size": len(content)}
                    )
                if not text:
                    data["message"] = None
            if group is not None:
                data["groupInfo"] = {"groupId": group, "type": "DELIVER"}
            if mention_bot:
                data["message"] = "\ufffc " + text
                data["mentions"] = [
                    {"name": self.account, "number": self.account, "uuid": BOT_UUID, "start": 0}
                ]
            envelope = {
                "source": number or uuid,
                "sourceNumber": number,
                "sourceUuid": uuid,
                "sourceName": "Alice",
                "sourceDevice": 1,
                "timestamp": ts,
                "serverReceivedTimestamp": self._clock_ms,
                "dataMessage": data,
            }
            self._add({"envelope": envelope, "account": self.account})
        return ts

    def push_receipt(self) -> None:
        """A delivery receipt (no text: never a turn)."""
        with self._cond:
            self._clock_ms += 1
            envelope = {
                "source": "+4915100000002",
                "sourceNumber": "+4915100000002",
                "timestamp": self._clock_ms,
                "receiptMessage": {"when": self._clock_ms, "isDelivery": True},
            }
            self._add({"envelope": envelope, "account": self.account})

    def _add(self, payload: dict[str, Any]) -> None:
        self._seq += 1
        self._events.append((self._seq, json.dumps(payload)))
        del self._events[:-BUFFER]
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._wake)

    def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        from vikingbot.testing.server import wait_until

        wait_until(self._cond, ready, timeout, "fake signal-cli")

    def wait_for_sent(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> list[dict[str, Any]]:
        self._wait(lambda: len(self.sent) >= n, timeout)
        with self._cond:
            return list(self.sent)

    async def wait_sent(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.wait_for_sent, n, timeout)

    async def wait_streams(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self._wait, lambda: self.streams >= n, timeout)

    # ---- the server -----------------------------------------------------

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
        self._changed = asyncio.Event()

    async def _check(self, request: Request) -> Response:
        from starlette.responses import Response

        return Response(status_code=200)

    async def _rpc(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not request.headers.get("content-type", "").startswith("application/json"):
            return JSONResponse(None, status_code=415)
        body = await request.json()
        rid, method, params = body.get("id"), body.get("method"), body.get("params") or {}

        def ok(result: Any) -> Response:
            return JSONResponse({"jsonrpc": "2.0", "result": result, "id": rid})

        def error(code: int, message: str) -> Response:
            failure = {"code": code, "message": message, "data": None}
            return JSONResponse({"jsonrpc": "2.0", "error": failure, "id": rid})

        if self.multi_account:
            if method == "listAccounts":
                return ok([{"number": self.account}])
            if params.pop("account", None) != self.account:
                return error(-32602, "Method requires valid account parameter")
        elif method == "listAccounts":
            return error(-32601, "Method not implemented")
        with self._cond:
            if method == "getUserStatus":
                return ok(
                    [
                        {"recipient": r, "number": r, "uuid": BOT_UUID, "isRegistered": True}
                        for r in params.get("recipient", [])
                    ]
                )
            if method == "getAttachment":
                self.downloads.append(str(params.get("id")))
                content = self.attachments.get(str(params.get("id")))
                if content is None or not (params.get("recipient") or params.get("groupId")):
                    return error(-1, f"Could not find attachment with ID: {params.get('id')}")
                return ok({"data": base64.b64encode(content).decode()})
            if method == "sendTyping":
                self.typing.append(params)
                self._cond.notify_all()
                return ok({})
            if method == "sendReceipt":
                self.receipts.append(params)
                self._cond.notify_all()
                return ok({})
            if method == "send":
                if "recipient" not in params and "groupId" not in params:
                    return error(-32602, "No recipients given")
                kind = self.send_results.pop(0) if self.send_results else "SUCCESS"
                if kind == "SUCCESS":
                    self.sent.append(params)
                    self._cond.notify_all()
                self._clock_ms += 1
                address = {"number": (params.get("recipient") or [None])[0]}
                return ok(
                    {
                        "timestamp": self._clock_ms,
                        "results": [{"recipientAddress": address, "type": kind}],
                    }
                )
        return error(-32601, "Method not implemented")

    async def _stream(self, last_id: str | None) -> AsyncIterator[bytes]:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._changed = asyncio.Event()
        with self._cond:
            after = self._seq  # a client without an id gets only new events
            if last_id is not None:
                after = 0
                if last_id.startswith(self._prefix) and last_id[len(self._prefix) :].isdigit():
                    after = int(last_id[len(self._prefix) :])
            self.streams += 1
            self.most_streams = max(self.most_streams, self.streams)
            self._cond.notify_all()
        try:
            yield b":\n"
            while not self._closing:
                with self._cond:
                    due = [(seq, data) for seq, data in self._events if seq > after]
                for seq, data in due:
                    after = seq
                    yield f"id:{self._prefix}{seq}\nevent:receive\ndata:{data}\n\n".encode()
                changed = self._changed
                if changed is None:
                    return
                try:
                    await asyncio.wait_for(changed.wait(), 1.0)
                except TimeoutError:
                    yield b":\n"  # keep-alive
        finally:
            with self._cond:
                self.streams -= 1
                self._cond.notify_all()

    async def _events_route(self, request: Request) -> Response:
        from starlette.responses import JSONResponse, StreamingResponse

        if self.multi_account and request.query_params.get("account") not in (None, self.account):
            return JSONResponse(None, status_code=400)
        return StreamingResponse(
            self._stream(request.headers.get("last-event-id")), media_type="text/event-stream"
        )

    def app(self) -> Starlette:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(
            routes=[
                Route("/api/v1/check", self._check, methods=["GET"]),
                Route("/api/v1/rpc", self._rpc, methods=["POST"]),
                Route("/api/v1/events", self._events_route, methods=["GET"]),
            ]
        )

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Run the fake on a free loopback port; yields the daemon's URL."""
        from vikingbot.testing.server import serve_app

        self._closing = False
        with serve_app(self.app()) as base_url:
            try:
                yield base_url
            finally:
                self._closing = True
                if self._loop is not None:
                    self._loop.call_soon_threadsafe(self._wake)
