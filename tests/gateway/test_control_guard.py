"""The control API's guard on the real Starlette app, from loopback and remote peers."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from vikingbot.gateway.control import ControlGuard, endpoint, json_body, opt_bool, opt_str

SECRET = "s3cret-value"
TOKEN = "gw-token"


def app_with_guard(audits: list[tuple[str, str, str]], token: str | None = TOKEN) -> Any:
    async def echo(request: Request) -> Any:
        body = await json_body(request)
        return {"workspace": opt_str(body, "workspace"), "force": opt_bool(body, "force")}

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(
        routes=[
            Route("/api/v1/echo", endpoint(echo), methods=["POST"]),
            Route("/health", health),
        ]
    )
    return ControlGuard(app, secret=SECRET, token=token, audit=lambda *row: audits.append(row))


def call(
    app: Any, peer: str, headers: dict[str, str], body: Any = None, path: str = "/api/v1/echo"
) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=(peer, 5555))
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            if path == "/health":
                return await client.get(path)
            if isinstance(body, bytes):
                return await client.post(path, content=body, headers=headers)
            return await client.post(path, json=body if body is not None else {}, headers=headers)

    return asyncio.run(go())


AUTH = {"Authorization": f"Bearer {SECRET}"}


def test_loopback_peer_with_the_secret_is_served() -> None:
    audits: list[tuple[str, str, str]] = []
    res = call(app_with_guard(audits), "127.0.0.1", AUTH, {"workspace": "shared", "force": True})
    assert res.status_code == 200
    assert res.json() == {"workspace": "shared", "force": True}
    assert audits == []


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"Authorization": "Bearer nope"}, 401), ({"Authorization": SECRET}, 401)],
)
def test_missing_or_forged_secret_is_401_and_audited(headers: dict[str, str], status: int) -> None:
    audits: list[tuple[str, str, str]] = []
    res = call(app_with_guard(audits), "127.0.0.1", headers)
    assert res.status_code == status
    assert "control secret" in res.json()["error"]
    assert [(peer, path) for peer, path, _ in audits] == [("127.0.0.1", "/api/v1/echo")]


def test_remote_peer_needs_the_gateway_token_too() -> None:
    audits: list[tuple[str, str, str]] = []
    app = app_with_guard(audits)
    res = call(app, "203.0.113.9", AUTH)
    assert res.status_code == 403
    assert "X-Vikingbot-Token" in res.json()["error"]
    assert audits[0][0] == "203.0.113.9"
    res = call(app, "203.0.113.9", {**AUTH, "X-Vikingbot-Token": "wrong"})
    assert res.status_code == 403
    res = call(app, "203.0.113.9", {**AUTH, "X-Vikingbot-Token": TOKEN})
    assert res.status_code == 200


def test_remote_peer_is_refused_when_no_token_is_configured() -> None:
    audits: list[tuple[str, str, str]] = []
    res = call(app_with_guard(audits, token=None), "203.0.113.9", {**AUTH, "X-Vikingbot-Token": ""})
    assert res.status_code == 403


def test_health_stays_open() -> None:
    audits: list[tuple[str, str, str]] = []
    res = call(app_with_guard(audits), "203.0.113.9", {}, path="/health")
    assert res.status_code == 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"workspace": 3}', "'workspace' must be a string"),
        (b'{"force": "yes"}', "'force' must be true or false"),
        (b"\xff\xfe", "not JSON"),
        (b'{"workspace": "' + b"x" * 70_000 + b'"}', "limit"),
    ],
)
def test_bad_bodies_get_a_clear_400(body: bytes, message: str) -> None:
    audits: list[tuple[str, str, str]] = []
    res = call(
        app_with_guard(audits), "127.0.0.1", {**AUTH, "Content-Type": "application/json"}, body
    )
    assert res.status_code == 400
    assert message in res.json()["error"]


def test_a_flood_of_refusals_is_audited_at_most_30_times_a_minute() -> None:
    audits: list[tuple[str, str, str]] = []
    app = app_with_guard(audits)
    for _ in range(40):
        assert call(app, "127.0.0.1", {}).status_code == 401
    assert len(audits) == 30
    assert app.refused == 40
