"""Each channel's HTTP routes, looked up per request: a channel a reload starts, stops
or restarts (issue 42) serves its routes at once, without a new HTTP app.

The gateway mounts one :class:`LiveRoutes` at ``/<name>`` for every channel it
knows; a request goes to the routes of the channel running under that name now,
and gets 404 while none is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.responses import PlainTextResponse
from starlette.routing import Router

if TYPE_CHECKING:
    from vikingbot.channels.base import Channel


class LiveRoutes:
    """ASGI app: the routes of ``current()``, the channel running now (or None)."""

    def __init__(self, current: Callable[[], Channel | None]) -> None:
        self._current = current
        self._made: tuple[Channel, Router] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        channel = self._current()
        if channel is None or not channel.running:
            await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
            return
        if self._made is None or self._made[0] is not channel:
            self._made = (channel, Router(routes=list(channel.routes())))
        await self._made[1](scope, receive, send)
