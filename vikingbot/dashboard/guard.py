"""ASGI guard in front of every dashboard route: session, CSRF, security headers."""

from __future__ import annotations

from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse

from vikingbot.bus.sent_files import FILES_LIMIT
from vikingbot.dashboard.auth import COOKIE, SECURITY_HEADERS, Auth, csrf_ok

OPEN = ("/login", "/login-token", "/static/")
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
MAX_BODY = 1024 * 1024
FILES_PATH = "/chat/"  # the chat slot form: a message with files (docs/media.md)
MAX_FORM_FILES = 20  # parts with a file in one form; the intake keeps bot.media.max_files
FORM_STATE = "form"  # where a multipart form parsed here waits for its route


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
        body = await _read_body(receive, FILES_LIMIT if sub.startswith(FILES_PATH) else MAX_BODY)
        if body is None:
            await PlainTextResponse("request too large", status_code=413)(
                scope, receive, send_secured
            )
            return
        given = _header(scope, b"x-csrf-token")
        kind = _header(scope, b"content-type") or ""
        form: FormData | None = None
        if given is None and "urlencoded" in kind:
            found = parse_qs(body.decode("utf-8", "replace")).get("csrf")
            given = found[0] if found else None
        elif kind.startswith("multipart/form-data") and sub.startswith(FILES_PATH):
            form = await _multipart(scope, body)  # parsed once; the route reads it from state
            if form is None:
                await PlainTextResponse(
                    f"the form could not be read (at most {MAX_FORM_FILES} files)",
                    status_code=400,
                )(scope, receive, send_secured)
                return
            token = form.get("csrf")
            given = token if given is None and isinstance(token, str) else given
        if not csrf_ok(session, given):
            if form is not None:
                await form.close()
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

        if form is None:
            await self.app(scope, replay, send_secured)
            return
        scope["state"][FORM_STATE] = form
        try:
            await self.app(scope, replay, send_secured)
        finally:
            await form.close()  # the uploads' spooled files


async def _multipart(scope: Any, body: bytes) -> FormData | None:
    """A multipart form (the chat's files), or None when it does not parse."""
    sent = False

    async def once() -> Any:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    bare = {k: v for k, v in scope.items() if k != "app"}  # a parse error: None, not a 400
    try:
        return await Request(bare, once).form(max_files=MAX_FORM_FILES, max_fields=50)
    except (MultiPartException, HTTPException, ValueError):
        return None


async def _read_body(receive: Any, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)
