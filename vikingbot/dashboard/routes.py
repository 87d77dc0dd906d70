"""The dashboard's routes, for the gateway to add to its app.

Everything lives under ``/ui`` behind the guard (session cookie, CSRF, CSP);
``/`` redirects there.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from vikingbot.dashboard import actions, pages, pairing
from vikingbot.dashboard.app import PREFIX, Dashboard
from vikingbot.dashboard.guard import Guard
from vikingbot.dashboard.parts import DashboardParts
from vikingbot.dashboard.render import HERE


def build(dash: Dashboard) -> Any:
    routes: list[BaseRoute] = [
        Route("/login", dash.login, methods=["GET", "POST"]),
        Route("/logout", dash.logout, methods=["POST"]),
        Route("/login-token", dash.login_token, methods=["POST"]),
        Route("/events", dash.events),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        *pages.routes(dash),
        *actions.routes(dash),
        *pairing.routes(dash),
    ]
    return Guard(Starlette(routes=routes), dash.auth)


def dashboard_routes(parts: DashboardParts) -> list[BaseRoute]:
    """The gateway adds these: ``/`` sends the browser to ``/ui/``."""
    dash = Dashboard(parts)

    async def root(request: Request) -> Response:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    return [Route("/", root), Mount(PREFIX, app=build(dash))]
