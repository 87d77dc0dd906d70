"""Loopback is not a trust boundary (issue 38): forged Host / Origin refused before any route,
the control secret never accepted in a URL, half-sent requests dropped. Raw HTTP against a
real gateway process."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.gateway_proc import GatewayProcess
from vikingbot.gateway.webguard import host_name, origin_host


@pytest.mark.parametrize(
    ("value", "host"),
    [
        ("127.0.0.1:8080", "127.0.0.1"),
        ("LocalHost", "localhost"),
        ("[::1]:18790", "::1"),
        ("[::1]", "::1"),
        ("evil.example:80", "evil.example"),
        ("evil.example:", None),
        ("[::1]x", None),
        ("a:b", None),
        ("", None),
    ],
)
def test_host_header_parsing(value: str, host: str | None) -> None:
    assert host_name(value) == host


def test_origin_parsing() -> None:
    assert origin_host("http://127.0.0.1:18790") == "127.0.0.1"
    assert origin_host("https://rebind.evil.example") == "rebind.evil.example"
    assert origin_host("null") is None
    assert origin_host("file://x/y") is None


@given(st.text(max_size=400))
def test_parsers_are_total(text: str) -> None:
    host_name(text)
    origin_host(text)


def raw(port: int, request: bytes, timeout: float = 5.0) -> bytes:
    """Send ``request`` as it is; the whole answer (until the gateway closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    home = tmp_path_factory.mktemp("web") / "home"
    home.mkdir()
    cfg = {
        "bot": {
            "gateway": {"allowedHosts": ["bot.example.org"], "headTimeoutS": 1, "bodyTimeoutS": 1}
        }
    }
    (home / "config.json").write_text(json.dumps(cfg))
    with GatewayProcess(home, fork=False) as gw:
        yield gw


def secret(gw: GatewayProcess) -> str:
    return (gw.home / "run" / "control.secret").read_text().strip()


@pytest.mark.parametrize("path", ["/health", "/metrics", "/api/v1/status", "/ui/login"])
def test_a_rebinding_host_is_refused_before_any_route(gateway: GatewayProcess, path: str) -> None:
    answer = raw(
        gateway.port,
        f"GET {path} HTTP/1.1\r\nHost: rebind.evil.example:{gateway.port}\r\n"
        "Connection: close\r\n\r\n".encode(),
    )
    assert status(answer) == 421
    assert b"pid" not in answer and b"hostname" not in answer


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "bot.example.org", "[::1]"])
def test_the_gateways_own_names_are_served(gateway: GatewayProcess, host: str) -> None:
    answer = raw(
        gateway.port,
        f"GET /health HTTP/1.1\r\nHost: {host}:{gateway.port}\r\nConnection: close\r\n\r\n".encode(),
    )
    assert status(answer) == 200 and b'"status"' in answer


def test_a_request_without_host_is_refused(gateway: GatewayProcess) -> None:
    answer = raw(gateway.port, b"GET /health HTTP/1.0\r\n\r\n")
    assert status(answer) == 421


def test_a_cross_site_post_is_refused_even_with_the_secret(gateway: GatewayProcess) -> None:
    body = b"{}"
    head = (
        f"POST /api/v1/inbox/read HTTP/1.1\r\nHost: 127.0.0.1:{gateway.port}\r\n"
        f"Authorization: Bearer {secret(gateway)}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n"
    )
    evil = raw(gateway.port, (head + "Origin: https://evil.example\r\n\r\n").encode() + body)
    assert status(evil) == 403
    ours = raw(
        gateway.port, (head + f"Origin: http://127.0.0.1:{gateway.port}\r\n\r\n").encode() + body
    )
    assert status(ours) == 200
    no_origin = raw(gateway.port, (head + "\r\n").encode() + body)  # curl, the CLI
    assert status(no_origin) == 200


def test_the_control_secret_does_not_log_in_through_a_url(gateway: GatewayProcess) -> None:
    answer = raw(
        gateway.port,
        f"GET /ui/login?token={secret(gateway)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Connection: close\r\n\r\n".encode(),
    )
    assert status(answer) == 401 and b"set-cookie" not in answer.lower()


def test_a_half_sent_request_is_dropped_at_its_deadline(gateway: GatewayProcess) -> None:
    t0 = time.monotonic()
    answer = raw(gateway.port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n", timeout=10)
    waited = time.monotonic() - t0
    assert answer == b"" and 0.5 < waited < 5  # closed at head_timeout_s (1 s), no answer
    assert gateway.get("/health")["status"] in ("ok", "degraded")


def test_a_half_sent_body_is_dropped_at_its_deadline(gateway: GatewayProcess) -> None:
    head = (
        f"POST /api/v1/inbox/read HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {secret(gateway)}\r\nContent-Length: 100\r\n\r\n"
    )
    t0 = time.monotonic()
    answer = raw(gateway.port, head.encode() + b'{"ids": [', timeout=10)
    assert time.monotonic() - t0 < 5  # closed at body_timeout_s (1 s)
    assert b" 200 " not in answer
