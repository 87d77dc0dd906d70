"""The gateway's HTTP face: `/health`, `/metrics`, and routes channels add."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

OPEN_PATHS = {"/health"}


def build_app(
    *,
    health: Callable[[], dict[str, Any]],
    metrics: Callable[[], bytes],
    token: str | None,
    extra_routes: Sequence[BaseRoute] = (),
    self_authenticating: Sequence[str] = ("/webhook/",),
) -> Starlette:
    """`/health` is always open; everything else needs the gateway token when one is set.

    Paths under ``self_authenticating`` check their own credentials (the webhook
    channel's inbound token).
    """

    async def health_ep(request: Request) -> Response:
        return JSONResponse(health())

    async def metrics_ep(request: Request) -> Response:
        return PlainTextResponse(metrics(), media_type="text/plain; version=0.0.4")

    app = Starlette(
        routes=[Route("/health", health_ep), Route("/metrics", metrics_ep), *extra_routes]
    )

    if token:

        @app.middleware("http")
        async def auth(request: Request, call_next: Any) -> Response:
            path = request.url.path
            if path in OPEN_PATHS or any(path.startswith(p) for p in self_authenticating):
                return await call_next(request)
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return JSONResponse({"error": "missing or wrong gateway token"}, status_code=401)
            return await call_next(request)

    return app
