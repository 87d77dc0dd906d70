"""A control-API chat turn answered as a stream of events (``"stream": true``).

``POST /api/v1/chat`` with ``{"stream": true}`` answers ``application/x-ndjson``:
one JSON object a line, ``{"event": "retry", "text": "the model API answered 503;
retrying in 0.8 s (retry 1 of 3)"}`` each time the model SDK retries during this
turn, ``{"event": "ask", "id": ..., "tool": ..., "preview": ..., "timeout_s": ...}`` for
each tool that needs approval (answered by ``POST /api/v1/chat/answer``), then exactly
one last line, ``{"event": "result", ...}`` (the object the
plain answer would be) or ``{"event": "error", "status": 409, "error": "..."}``.
An attached `vikingbot chat` uses it to show retries as they happen.

The turn runs while the answer is being sent, so this response keeps its task in
the control API's ``inflight`` set (the gateway's stop cancels it like any other
request), and it cancels the turn when the client hangs up (Ctrl-C in the chat):
the prompt stays in the session, no reply is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from loguru import logger
from starlette.responses import Response

from vikingbot.agent.approval import TURN_ASKER
from vikingbot.errors import VikingbotError
from vikingbot.gateway.errors import BadRequest, NotFound
from vikingbot.providers.sdk_retries import reporting

MEDIA_TYPE = "application/x-ndjson"
Asker = Callable[
    [Callable[[dict[str, Any]], bool]], Callable[[str, dict[str, Any]], Awaitable[bool]]
]
"""``asker(emit)``: the turn's approval asker, putting its questions on the stream."""


STOPPING = {
    "event": "error",
    "status": 503,
    "error": "the gateway is stopping; this request was cancelled",
}


async def _send(send: Any, obj: dict[str, Any], *, more: bool) -> None:
    body = json.dumps(obj, default=str).encode() + b"\n"
    await send({"type": "http.response.body", "body": body, "more_body": more})


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, BadRequest):
        status = 400
    elif isinstance(exc, NotFound):
        status = 404
    elif isinstance(exc, VikingbotError):
        status = 409
    else:
        status = 500
    return {"event": "error", "status": status, "error": str(exc) or type(exc).__name__}


class ChatStream(Response):
    """Runs ``turn()`` and streams its retries, then its result (see the module docstring)."""

    media_type = MEDIA_TYPE

    def __init__(
        self,
        turn: Callable[[], Awaitable[dict[str, Any]]],
        *,
        inflight: set[asyncio.Task[Any]] | None,
        path: str,
        asker: Asker | None = None,
    ) -> None:
        # no super().__init__: it would announce a Content-Length for an empty body
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", MEDIA_TYPE.encode())]
        self._turn = turn
        self._inflight = inflight
        self._path = path
        self._asker = asker

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        me = asyncio.current_task()
        if self._inflight is not None and me is not None:
            self._inflight.add(me)
        try:
            await self._serve(receive, send)
        finally:
            if self._inflight is not None and me is not None:
                self._inflight.discard(me)

    async def _serve(self, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1000)

        def retried(text: str) -> None:
            with contextlib.suppress(asyncio.QueueFull):  # a flood is capped, not buffered
                events.put_nowait({"event": "retry", "text": text})

        def emit(event: dict[str, Any]) -> bool:
            try:
                events.put_nowait(event)
            except asyncio.QueueFull:
                return False
            return True

        # the turn's task inherits the reporter and the asker (contexts), nobody else does
        ask = TURN_ASKER.set(self._asker(emit) if self._asker is not None else None)
        try:
            with reporting(retried):
                turn = asyncio.ensure_future(self._turn())
        finally:
            TURN_ASKER.reset(ask)

        async def hang_up() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        watcher = asyncio.ensure_future(hang_up())
        getter: asyncio.Future[dict[str, Any]] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(events.get())
                done, _ = await asyncio.wait(
                    {turn, watcher, getter}, return_when=asyncio.FIRST_COMPLETED
                )
                if getter in done:
                    await _send(send, getter.result(), more=True)
                    continue
                getter.cancel()
                if turn in done:
                    break
                await self._stop(turn, watcher)  # the turn's history is written first
                logger.info("control API: {} cancelled: the client went away", self._path)
                return
            while not events.empty():
                await _send(send, events.get_nowait(), more=True)
            failure = turn.exception()
            last = _error(failure) if failure is not None else _result(turn.result())
        except asyncio.CancelledError:  # the gateway is stopping
            await self._stop(turn, watcher)
            with contextlib.suppress(Exception):
                await _send(send, STOPPING, more=False)
            raise
        finally:
            if getter is not None:
                getter.cancel()
            await self._stop(turn, watcher)
        if last.get("status") == 500:
            logger.opt(exception=failure).error("control API: {} failed", self._path)
        await _send(send, last, more=False)

    @staticmethod
    async def _stop(turn: asyncio.Future[Any], watcher: asyncio.Future[Any]) -> None:
        watcher.cancel()
        if not turn.done():
            turn.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await turn  # the turn's history is written before we go


def _result(data: dict[str, Any]) -> dict[str, Any]:
    return {"event": "result", **data}
