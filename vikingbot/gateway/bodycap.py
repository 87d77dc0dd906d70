"""Every request body the gateway takes is capped before it is read (pure ASGI).

:class:`BodyCap` wraps the whole HTTP app, outside every route and guard: a request
whose ``Content-Length`` is over its path's limit is answered ``413`` before one
byte of its body is read; a body sent without a length (chunked) is counted as it
arrives and cut off with ``413`` at the limit. No route can then hold more than its
limit of one request in memory. The limits (docs/gateway.md):

========================  ========  ==========================================
path                      limit     why
========================  ========  ==========================================
``/feishu/``              1 MiB     Feishu events are a few KiB
``/api/v1/chat``          48 MiB    a chat message with files (base64, docs/media.md)
``/webhook/inbound``      48 MiB    an inbound message with files (base64, docs/media.md)
``/webhook/``             64 KiB    the webhook channel's own limit
``/api/``                 64 KiB    control-API commands are small JSON
``/ui/chat/``             48 MiB    a dashboard chat message with files (multipart)
``/ui/``                  1 MiB     dashboard forms (its guard checks 1 MiB too)
anything else             1 MiB
========================  ========  ==========================================
"""

from __future__ import annotations

import json
from typing import Any

from vikingbot.bus.sent_files import FILES_LIMIT

KIB = 1024
MIB = 1024 * KIB
DEFAULT_LIMIT = MIB
EXACT: dict[str, int] = {"/api/v1/chat": FILES_LIMIT, "/webhook/inbound": FILES_LIMIT}
LIMITS: tuple[tuple[str, int], ...] = (
    ("/feishu/", MIB),
    ("/webhook/", 64 * KIB),
    ("/api/", 64 * KIB),
    ("/ui/chat/", FILES_LIMIT),
    ("/ui/", MIB),
)


def limit_for(path: str) -> int:
    """The most bytes a request body to ``path`` may have."""
    if path in EXACT:
        return EXACT[path]
    for prefix, limit in LIMITS:
        if path.startswith(prefix):
            return limit
    return DEFAULT_LIMIT


def _length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() and len(text) < 19 else -1
    return None


class BodyCap:
    """ASGI wrapper: request bodies over their path's limit get ``413``, unread."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limit_for(scope.get("path", ""))
        length = _length(scope)
        if length is not None and (length < 0 or length > limit):
            await _too_large(send, limit)
            return
        seen = 0
        over = started = False

        async def capped_receive() -> Any:
            nonlocal seen, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:  # the app sees a client that went away; we answer 413
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def watched_send(message: Any) -> None:
            nonlocal started
            if over:
                return  # the app's answer to a cut body is replaced by the 413
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, capped_receive, watched_send)
        except Exception:
            if not over:
                raise
        if over and not started:
            await _too_large(send, limit)


async def _too_large(send: Any, limit: int) -> None:
    body = json.dumps({"error": f"request body too large (limit {limit} bytes)"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
