"""The CLI's client of a running gateway's control API.

``GatewayClient.discover(paths)`` finds the home's gateway: on the embedded store
the home lock must be held (a crashed gateway's leftover ``gateway.json`` is
ignored); otherwise the recorded pid must be alive. It reads the control secret
(``run/control.secret``) and talks plain HTTP on loopback with the standard
library (no import cost for a one-shot command).

A starting gateway publishes ``gateway.json`` right after it binds its port and
before it serves (gateway/supervisor.py). So a held lock without a live record,
or a refused connect to the recorded address while the recorded pid lives, means
"the gateway is starting": the client waits for it, at most ``STARTING_WAIT_S``,
instead of running the command locally beside it.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vikingbot.errors import VikingbotError
from vikingbot.gateway.lock import GatewayInfo, lock_is_held, pid_alive, read_info, read_secret

if TYPE_CHECKING:
    from vikingbot.config.loader import Paths

NO_GATEWAY_NOTE = "no gateway is running: results stay in the inbox"
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
STARTING_WAIT_S = 15.0  # how long a starting gateway gets to publish itself and listen
POLL_S = 0.05


class GatewayUnavailable(VikingbotError):
    """The gateway could not be reached, or stopped answering during a request."""


class GatewayRefused(VikingbotError):
    """The gateway answered with an error (the message is the gateway's)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class GatewayClient:
    def __init__(
        self,
        info: GatewayInfo,
        secret: str,
        *,
        token: str | None = None,
        starting_wait_s: float = STARTING_WAIT_S,
        home: Path | None = None,
    ) -> None:
        self.info = info
        self.home = home  # where the gateway's lock is (tells a dead gateway apart)
        self._secret = secret
        self._token = token
        self.starting_wait_s = starting_wait_s

    @classmethod
    def discover(cls, paths: Paths, *, token: str | None = None) -> GatewayClient | None:
        """The home's live gateway, or None (then the CLI works locally)."""
        return cls.find(paths.home, token=token)

    @classmethod
    def find(
        cls, home: Path, *, token: str | None = None, starting_wait_s: float = STARTING_WAIT_S
    ) -> GatewayClient | None:
        """Like :meth:`discover`, from the home directory alone (no config loaded).

        A gateway on the embedded store holds the home lock; a leftover
        ``gateway.json`` of a crashed one is ignored. One sharing the home
        (PostgreSQL) is alive while its pid is. A held lock whose holder has not
        published its record yet is a gateway starting: waited for, at most
        ``starting_wait_s`` (then None, as if there were none).
        """
        deadline = time.monotonic() + starting_wait_s
        while True:
            info = read_info(home)
            if info is not None and info.shared:
                if not pid_alive(info.pid):
                    return None
            elif not lock_is_held(home):
                return None
            elif info is None or not pid_alive(info.pid):
                if time.monotonic() >= deadline:
                    return None
                time.sleep(POLL_S)  # the lock's holder is about to publish its address
                continue
            secret = read_secret(home)
            if secret is None:
                return None
            return cls(info, secret, token=token, starting_wait_s=starting_wait_s, home=home)

    @property
    def needs_token(self) -> bool:
        """Whether we reach the gateway on a non-loopback address (then it wants the token)."""
        from vikingbot.gateway.peers import is_loopback

        return not is_loopback(self._connect_host())

    @property
    def via(self) -> str:
        return "gateway"

    def _connect_host(self) -> str:
        host = self.info.host
        if host in ("", "0.0.0.0"):
            return "127.0.0.1"
        if host == "::":
            return "::1"
        return host

    @property
    def base_url(self) -> str:
        """``http://host:port`` to reach the gateway at (for an async client of its own)."""
        host = self._connect_host()
        return (
            f"http://[{host}]:{self.info.port}"
            if ":" in host
            else f"http://{host}:{self.info.port}"
        )

    def headers(self) -> dict[str, str]:
        """The headers every control request carries (the secret, the token when needed)."""
        headers = {"Authorization": f"Bearer {self._secret}", "Accept": "application/json"}
        if self._token:
            headers["X-Vikingbot-Token"] = self._token
        return headers

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, timeout: float = 3600
    ) -> Any:
        """Send one request; the JSON answer. Raises GatewayUnavailable / GatewayRefused."""
        headers = self.headers()
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        where = f"the gateway ({self.info.describe()})"
        conn = self._connect(where, timeout)
        try:
            try:
                conn.request(method, path, body=payload, headers=headers)
            except OSError as exc:
                raise GatewayUnavailable(f"cannot reach {where}: {exc}") from None
            try:
                resp = conn.getresponse()
                raw = resp.read(MAX_RESPONSE_BYTES + 1)
            except (OSError, http.client.HTTPException) as exc:
                if isinstance(exc, socket.timeout | TimeoutError):
                    raise GatewayUnavailable(
                        f"{where} did not answer within {timeout:g}s"
                    ) from None
                raise GatewayUnavailable(self._lost(where, exc)) from None
        finally:
            conn.close()
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = None
        if resp.status >= 400:
            message = data.get("error") if isinstance(data, dict) else None
            raise GatewayRefused(resp.status, str(message or f"HTTP {resp.status}"))
        return data

    def _lost(self, where: str, exc: BaseException) -> str:
        """What to tell the user when the connection broke before the answer came."""
        if self._gone():
            return (
                f"{where} stopped while handling this request; what it finished is kept "
                "(messages sent, the outbox, the inbox, the run ledger) and unsent messages "
                "go out when it runs again: start it with `vikingbot gateway`"
            )
        return (
            f"{where} stopped answering during the request ({type(exc).__name__}); "
            "it may have stopped: check `vikingbot status` and its log"
        )

    def _gone(self) -> bool:
        """Whether the gateway process ended (its home lock is free, or its pid gone);
        looked at for up to a second, as the connection may break a moment before."""
        deadline = time.monotonic() + 1.0
        while True:
            gone = not pid_alive(self.info.pid) or (
                self.home is not None and not self.info.shared and not lock_is_held(self.home)
            )
            if gone or time.monotonic() >= deadline:
                return gone
            time.sleep(POLL_S)

    def _connect(self, where: str, timeout: float) -> http.client.HTTPConnection:
        """A connection to the gateway; a refused connect while its pid lives is a
        gateway still starting (it publishes before it listens): retried, bounded."""
        deadline = time.monotonic() + self.starting_wait_s
        while True:
            conn = http.client.HTTPConnection(self._connect_host(), self.info.port, timeout=timeout)
            try:
                conn.connect()
            except ConnectionRefusedError:
                conn.close()
                if not pid_alive(self.info.pid):
                    raise GatewayUnavailable(f"{where} is not running any more") from None
                if time.monotonic() >= deadline:
                    raise GatewayUnavailable(
                        f"{where} is still starting after {self.starting_wait_s:g}s "
                        "(its port refuses connections): try again, or check its log"
                    ) from None
                time.sleep(POLL_S)
                continue
            except OSError as exc:
                conn.close()
                raise GatewayUnavailable(f"cannot reach {where}: {exc}") from None
            return conn

    def get(self, path: str, *, timeout: float = 3600) -> Any:
        return self.request("GET", path, timeout=timeout)

    def post(self, path: str, body: dict[str, Any] | None = None, *, timeout: float = 3600) -> Any:
        return self.request("POST", path, body or {}, timeout=timeout)
