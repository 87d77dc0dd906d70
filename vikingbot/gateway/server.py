"""The gateway's HTTP face: `/health`, `/metrics`, and routes channels add."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from vikingbot.clock import wait_event

TICK_S = 30.0  # how often the idle HTTP server wakes (uvicorn's own: 0.1 s)

OPEN_PATHS = {"/health", "/"}  # "/" only redirects to the dashboard (/ui/, own login)


def build_app(
    *,
    health: Callable[[], Awaitable[dict[str, Any]]],
    metrics: Callable[[], bytes],
    token: str | None,
    extra_routes: Sequence[BaseRoute] = (),
    self_authenticating: Sequence[str] = (),
) -> Any:
    """`/health` is always open; everything else needs the gateway token when one is set.

    Paths under ``self_authenticating`` check their own credentials (the webhook
    channel's inbound token).
    """

    async def health_ep(request: Request) -> Response:
        return JSONResponse(await health())

    async def metrics_ep(request: Request) -> Response:
        return PlainTextResponse(metrics(), media_type="text/plain; version=0.0.4")

    app = Starlette(
        routes=[Route("/health", health_ep), Route("/metrics", metrics_ep), *extra_routes]
    )
    if not token:
        return app
    return TokenGuard(app, token, open_prefixes=tuple(self_authenticating))


class TokenGuard:
    """ASGI wrapper: requests need ``Authorization: Bearer <token>`` except open paths."""

    def __init__(self, app: Any, token: str, open_prefixes: tuple[str, ...] = ()) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self._open = open_prefixes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path = scope.get("path", "")
            if path not in OPEN_PATHS and not any(path.startswith(p) for p in self._open):
                given = dict(scope.get("headers") or []).get(b"authorization", b"")
                if not hmac.compare_digest(given, self._expected):
                    response = JSONResponse(
                        {"error": "missing or wrong gateway token"}, status_code=401
                    )
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


class QuietServer:
    """uvicorn's Server without its own signal handling (the gateway owns signals)."""

    def __new__(cls, config: Any) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Any:
                yield

            async def main_loop(self) -> None:
                # uvicorn wakes 10 times a second; every TICK_S is plenty for an idle
                # laptop gateway (the Date header refreshes every tick: at most that
                # stale). The gateway's stop wakes it at once (``wake``).
                self.wake = asyncio.Event()
                counter = 0
                should_exit = await self.on_tick(counter)
                while not should_exit:
                    counter = (counter + round(TICK_S * 10)) % 864000
                    await wait_event(self.wake, TICK_S)
                    should_exit = await self.on_tick(counter)

        return Server(config)
