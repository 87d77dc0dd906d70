"""A loopback endpoint that records pushes, for Apprise's ``ntfy://`` and ``json://``.

    with PushEndpoint.serving() as push:
        push.url("phone")           # ntfy://127.0.0.1:<port>/phone
        push.answers = [429, 500]   # the next requests get these; then 200
        push.fail_every = 3         # or: every third request answers 500
        push.received               # what was accepted (title, message), in order

A request that gets an error answer is not recorded as received (the service did
not take it), as a real ntfy or webhook server behaves.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from vikingbot.testing.server import serve_app


@dataclass
class Push:
    path: str
    title: str
    message: str


@dataclass
class PushEndpoint:
    base: str = ""
    received: list[Push] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)
    fail_every: int = 0
    requests: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    @contextlib.contextmanager
    def serving(cls) -> Iterator[PushEndpoint]:
        endpoint = cls()
        app = Starlette(routes=[Route("/{path:path}", endpoint._handle, methods=["POST", "PUT"])])
        with serve_app(app) as base:
            endpoint.base = base
            yield endpoint

    def url(self, topic: str, scheme: str = "ntfy") -> str:
        return f"{scheme}://{self.base.removeprefix('http://')}/{topic}"

    async def _handle(self, request: Request) -> JSONResponse:
        body = await request.body()
        with self.cond:
            self.requests += 1
            status = 200
            if self.answers:
                status = self.answers.pop(0)
            elif self.fail_every and self.requests % self.fail_every == 0:
                status = 500
            if status != 200:
                headers = {"Retry-After": "0"} if status == 429 else {}
                return JSONResponse({"error": "no"}, status_code=status, headers=headers)
            title, message = _read(request, body)
            self.received.append(Push(request.url.path, title, message))
            self.cond.notify_all()
        return JSONResponse({"id": str(self.requests), "event": "message", "topic": "t"})

    def wait_received(self, count: int, timeout: float = 30.0) -> list[Push]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.received) >= count, timeout):
                raise AssertionError(f"{len(self.received)} pushes arrived, not {count}")
            return list(self.received)


def _read(request: Request, body: bytes) -> tuple[str, str]:
    """(title, message) from an ntfy request (headers + body) or a JSON one."""
    kind = request.headers.get("content-type", "")
    if "json" in kind:
        try:
            data: Any = json.loads(body)
        except ValueError:
            data = {}
        if isinstance(data, dict):
            return str(data.get("title", "")), str(data.get("message", data.get("body", "")))
    title = request.headers.get("x-title", request.headers.get("title", ""))
    return title, body.decode("utf-8", "replace")
