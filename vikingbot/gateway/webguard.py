"""Loopback is not a trust boundary for the web: Host and Origin checks, request deadlines.

A page on any site can make a browser send requests to ``127.0.0.1``; with DNS
rebinding it can even read the answers, under a host name of its own. So,
before any route:

- ``Host`` must name this gateway: an IP address (a rebinding page always uses
  a host name), ``localhost``, the machine's own host name, the configured
  ``bot.gateway.host``, or a name listed in ``bot.gateway.allowed_hosts`` (a
  reverse proxy's public name). Anything else gets ``421`` and nothing else.
- A ``POST`` (or any other state-changing method) with an ``Origin`` header
  must come from such a host too; browsers always send ``Origin`` on
  cross-site POSTs, other clients usually send none, which is fine.

``deadline_protocol(head_s, body_s)`` is uvicorn's h11 protocol with two
deadlines (``bot.gateway.head_timeout_s`` / ``body_timeout_s``): the request
head must arrive within ``head_s`` of the connection (or of the previous
response), its body within ``body_s`` of the head; a request that misses one
is dropped (the connection closed), so half-sent requests cannot hold
connections open.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import h11
from loguru import logger
from starlette.responses import PlainTextResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def host_name(value: str) -> str | None:
    """The host part of a ``Host`` value (``name``, ``name:port``, ``[v6]:port``), lower-case;
    ``None`` when it is not well-formed. Pure and total."""
    value = value.strip().lower()
    if not value or len(value) > 300:
        return None
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :]
        if end < 0 or (rest and not (rest.startswith(":") and _port(rest[1:]))):
            return None
        return value[1:end]
    name, sep, port = value.rpartition(":")
    if not sep:
        return value
    return name if name and _port(port) else None


def _port(text: str) -> bool:
    return text.isascii() and text.isdigit() and 0 < len(text) <= 5


def origin_host(origin: str) -> str | None:
    """The host of an ``Origin`` value (``scheme://host[:port]``); ``None`` for ``null`` or junk."""
    scheme, sep, rest = origin.strip().partition("://")
    if not sep or scheme.lower() not in ("http", "https") or "/" in rest:
        return None
    return host_name(rest)


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def own_names(bind_host: str, allowed: Iterable[str]) -> frozenset[str]:
    """The host names that mean this gateway."""
    names = {"localhost", bind_host.lower(), *(a.strip().lower() for a in allowed)}
    try:
        names.add(socket.gethostname().lower())
        names.add(socket.getfqdn().lower())
    except OSError:
        pass
    return frozenset(n for n in names if n)


class WebGuard:
    """ASGI wrapper: the ``Host`` and ``Origin`` checks of the module docstring."""

    def __init__(self, app: Any, names: frozenset[str]) -> None:
        self.app = app
        self.names = names
        self.refused = 0

    def ours(self, host: str | None) -> bool:
        return host is not None and (is_ip(host) or host in self.names)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host")
            shown = (host or b"").decode("latin-1")
            if host is None or not self.ours(host_name(shown)):
                return await self._refuse(scope, receive, send, 421, "Host", shown)
            origin = headers.get(b"origin")
            if origin is not None and scope.get("method", "GET") not in SAFE_METHODS:
                text = origin.decode("latin-1")
                if not self.ours(origin_host(text)):
                    return await self._refuse(scope, receive, send, 403, "Origin", text)
        await self.app(scope, receive, send)

    async def _refuse(
        self, scope: Any, receive: Any, send: Any, status: int, what: str, value: str
    ) -> None:
        self.refused += 1
        if self.refused <= 20 or self.refused % 1000 == 0:
            logger.warning(
                "http: refused {} {} with {} {!r} (not this gateway; bot.gateway.allowed_hosts)",
                scope.get("method"),
                str(scope.get("path", ""))[:200],
                what,
                value[:200],
            )
        text = f"{what} {value[:200]!r} is not this gateway (see bot.gateway.allowed_hosts)\n"
        await PlainTextResponse(text, status_code=status)(scope, receive, send)


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the head and body deadlines of the module docstring."""

    head_s: float = 10.0
    body_s: float = 30.0
    _deadline: Any = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm(self.head_s)

    def handle_events(self) -> None:
        waiting_head = self.conn.their_state is h11.IDLE
        super().handle_events()
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if waiting_head:
                self._arm(self.body_s)
        elif state is not h11.IDLE:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm(self.head_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            logger.info("http: dropped a request from {} that was not sent in time", self.client)
            self.transport.close()


def deadline_protocol(head_s: float, body_s: float) -> type[DeadlineH11Protocol]:
    """The protocol class uvicorn is given (``uvicorn.Config(http=...)``)."""
    return type("DeadlineH11", (DeadlineH11Protocol,), {"head_s": head_s, "body_s": body_s})
