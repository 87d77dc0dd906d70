"""ASGI guard in front of every dashboard route: session, CSRF, security headers."""

from __future__ import annotations

from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from starlette.responses import PlainTextResponse, RedirectResponse

from vikingbot.dashboard.auth import COOKIE, SECURITY_HEADERS, Auth, csrf_ok

OPEN = ("/login", "/login-token", "/static/")
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
MAX_BODY = 1024 * 1024


def cookie_value(scope: Any, name: str) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:
                return None
            if name in jar:
                return jar[name].value
    return None


def _header(scope: Any, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class Guard:
    def __init__(self, app: Any, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                have = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in SECURITY_HEADERS if k not in have]
                message = {**message, "headers": headers}
            await send(message)

        path = scope.get("path", "")
        root = scope.get("root_path", "")
        sub = path[len(root) :] if root and path.startswith(root) else path
        if any(sub == p or sub.startswith(p) for p in OPEN if p.endswith("/")) or sub in OPEN:
            await self.app(scope, receive, send_secured)
            return
        session = self.auth.session(cookie_value(scope, COOKIE))
        if session is None:
            if scope["method"] == "GET" and _header(scope, b"hx-request") is None:
                response: Any = RedirectResponse(f"{root}/login", status_code=303)
            else:
                response = PlainTextResponse("log in first (/ui/login)", status_code=401)
            await response(scope, receive, send_secured)
            return
        scope.setdefault("state", {})["session"] = session
        if scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send_secured)
            return
        body = await _read_body(receive)
        if body is None:
            await PlainTextResponse("request too large", status_code=413)(
                scope, receive, send_secured
            )
            return
        given = _header(scope, b"x-csrf-token")
        if given is None and "urlencoded" in (_header(scope, b"content-type") or ""):
            found = parse_qs(body.decode("utf-8", "replace")).get("csrf")
            given = found[0] if found else None
        if not csrf_ok(session, given):
            await PlainTextResponse(
                "refused: missing or wrong CSRF token (reload the page)", status_code=403
            )(scope, receive, send_secured)
            return
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send_secured)


async def _read_body(receive: Any) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)
