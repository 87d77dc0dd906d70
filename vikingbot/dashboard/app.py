"""The dashboard's shared state and helpers: auth, the bell, rendering, login, events.

Pages are in ``pages.py``, state-changing actions in ``actions.py``; both go
through the same service objects the CLI and the gateway use (heartbeat service,
cron service, inbox, config editing). ``routes.py`` puts it together.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from vikingbot.dashboard.auth import COOKIE, Auth, read_secret
from vikingbot.dashboard.bell import Bell, inbox_reading
from vikingbot.dashboard.guard import cookie_value
from vikingbot.dashboard.parts import DashboardParts
from vikingbot.dashboard.render import render

PREFIX = "/ui"
NAV = [
    ("overview", "/", "Overview"),
    ("workspaces", "/workspaces", "Workspaces"),
    ("runs", "/runs", "Runs"),
    ("inbox", "/inbox", "Inbox"),
    ("chat", "/chat/default", "Chat"),
    ("cron", "/cron", "Cron"),
    ("pairing", "/pairing", "Pairing"),
    ("audit", "/audit", "Audit"),
]


class Dashboard:
    def __init__(self, parts: DashboardParts, *, bell_interval_s: float = 0.25) -> None:
        self.parts = parts
        self.auth = Auth(self._login_secrets)
        self.bell = Bell(inbox_reading(parts.store), interval_s=bell_interval_s)
        self.tasks: set[asyncio.Task[Any]] = set()

    def _login_secrets(self) -> list[str]:
        found = [read_secret(self.parts.secret_file), self.parts.gateway_token()]
        return [s for s in found if s]

    # ------------------------------------------------------------ helpers

    def page(
        self,
        request: Request,
        template: str,
        active: str,
        *,
        seen: tuple[int, int] | None = None,
        **ctx: Any,
    ) -> HTMLResponse:
        """A full page. ``seen``: the bell reading taken before the page's data was read;
        the page's script refreshes its live lists when the first live reading differs."""
        session = request.scope["state"]["session"]
        seen = seen or self.bell.last
        html = render(
            template,
            base=PREFIX,
            nav=NAV,
            active=active,
            csrf=session.csrf,
            unread=seen[0] if seen else None,
            seen=f"{seen[0]} {seen[1]}" if seen else "",
            **ctx,
        )
        return HTMLResponse(html)

    def fragment(self, template: str, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(render(template, base=PREFIX, **ctx))

    @staticmethod
    async def form(request: Request) -> dict[str, str]:
        body = (await request.body()).decode("utf-8", "replace")
        return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}

    def spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=f"vikingbot:dashboard:{name}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ------------------------------------------------------------ login

    async def login(self, request: Request) -> Response:
        given = request.query_params.get("token", "")
        one_time_only = True  # a URL carries only one-time login tokens, never a secret
        if request.method == "POST":
            given = (await self.form(request)).get("token", "")
            one_time_only = False
        if given:
            started = self.auth.login(given, one_time_only=one_time_only)
            if started is not None:
                sid, _ = started
                response = RedirectResponse(f"{PREFIX}/", status_code=303)
                response.set_cookie(
                    COOKIE,
                    sid,
                    httponly=True,
                    samesite="strict",
                    secure=request.url.scheme == "https",
                    path=PREFIX,
                )
                return response
        error = "That token is not valid (or was already used)." if given else None
        html = render("login.html", base=PREFIX, error=error)
        return HTMLResponse(html, status_code=401 if given else 200)

    async def logout(self, request: Request) -> Response:
        self.auth.logout(cookie_value(request.scope, COOKIE))
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        response.delete_cookie(COOKIE, path=PREFIX)
        return response

    async def login_token(self, request: Request) -> Response:
        """A one-time login link for `vikingbot dashboard` (needs the control secret)."""
        secret = read_secret(self.parts.secret_file)
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not secret or not given or not self.auth.secret_ok(given) or given != secret:
            return JSONResponse({"error": "needs the control secret"}, status_code=401)
        token = self.auth.issue_login_token()
        return JSONResponse({"path": f"{PREFIX}/login?token={token}", "expires_in_s": 120})

    # ------------------------------------------------------------ events

    async def events(self, request: Request) -> Response:
        from starlette.responses import StreamingResponse

        async def stream() -> Any:
            yield "retry: 1000\n\n"
            async for unread, newest in self.bell.listen(self.parts.stopping):
                yield f"event: bell\ndata: {unread} {newest}\n\n"
                if await request.is_disconnected():
                    break

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )
