"""The webhook channel: inbound POSTs through the gateway route, outbound POSTs to receivers."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.outbound import send_reply
from vikingbot.bus import MessageBus
from vikingbot.bus.sent_files import encode_file
from vikingbot.channels.manager import ChannelManager
from vikingbot.channels.webhook import MAX_BODY_BYTES
from vikingbot.config.schema import Config
from vikingbot.delivery.types import OutboundMessage
from vikingbot.testing.server import serve_app

TOKEN = "s3cret-inbound"


class Receiver:
    """A webhook receiver on loopback that records bodies; it can fail on purpose."""

    def __init__(self, fail_first: int = 0, status: int = 503) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.fail_first = fail_first
        self.status = status
        self.calls = 0
        self._lock = threading.Lock()

    async def handle(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.calls += 1
            if self.calls <= self.fail_first:
                return JSONResponse({"error": "try later"}, status_code=self.status)
            self.bodies.append(body)
        return JSONResponse({"ok": True})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook", self.handle, methods=["POST"])])


@pytest.fixture
def receivers() -> Iterator[Callable[..., tuple[Receiver, str]]]:
    from contextlib import ExitStack

    with ExitStack() as stack:

        def make(**kwargs: Any) -> tuple[Receiver, str]:
            receiver = Receiver(**kwargs)
            url = stack.enter_context(serve_app(receiver.app()))
            return receiver, f"{url}/hook"

        yield make


def webhook(urls: list[str], **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "outboundUrls": urls, "inboundToken": TOKEN, **extra}


async def started(config: Config, bus: MessageBus, store: Any) -> ChannelManager:
    manager = ChannelManager(config, bus=bus, store=store, retry_delay_s=0.01)
    await manager.start()
    return manager


async def test_outbound_posts_json_to_every_url(
    receivers: Callable[..., tuple[Receiver, str]],
    store: Any,
    bus: MessageBus,
    make_config: Callable[..., Config],
) -> None:
    first, url1 = receivers()
    second, url2 = receivers()
    manager = await started(make_config(webhook=webhook([url1, url2])), bus, store)
    try:
        msg = OutboundMessage("webhook", "ops", "disk is 91% full", thread="t1", dedupe_key="run-7")
        assert await send_reply(manager, msg)
        expected = {
            "channel": "webhook",
            "chat_id": "ops",
            "thread": "t1",
            "text": "disk is 91% full",
            "dedupe_key": "run-7",
        }
        assert first.bodies == [expected]
        assert second.bodies == [expected]
    finally:
        await manager.stop()


async def test_a_failing_url_is_retried_without_repeating_the_others(
    receivers: Callable[..., tuple[Receiver, str]],
    store: Any,
    bus: MessageBus,
    make_config: Callable[..., Config],
) -> None:
    steady, url1 = receivers()
    flaky, url2 = receivers(fail_first=2)
    manager = await started(make_config(webhook=webhook([url1, url2])), bus, store)
    try:
        assert await send_reply(
            manager, OutboundMessage("webhook", "ops", "hello", dedupe_key="k-1")
        )
        assert len(steady.bodies) == 1
        assert len(flaky.bodies) == 1
        assert flaky.calls == 3
    finally:
        await manager.stop()


async def test_a_receiver_refusing_the_message_is_not_retried(
    receivers: Callable[..., tuple[Receiver, str]],
    store: Any,
    bus: MessageBus,
    make_config: Callable[..., Config],
) -> None:
    refusing, url = receivers(fail_first=99, status=404)
    manager = await started(make_config(webhook=webhook([url])), bus, store)
    try:
        assert not await send_reply(
            manager, OutboundMessage("webhook", "ops", "hello", dedupe_key="k-2")
        )
        assert refusing.calls == 1
        row = manager.outbox.get("k-2")
        assert row is not None and row.status == "failed" and "HTTP 404" in (row.last_error or "")
    finally:
        await manager.stop()


async def _client(manager: ChannelManager) -> httpx.AsyncClient:
    app = Starlette(routes=manager.routes())
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway")


async def test_inbound_with_the_token_reaches_the_agent_and_is_answered(
    receivers: Callable[..., tuple[Receiver, str]],
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
    eventually: Callable[..., Awaitable[None]],
) -> None:
    out, url = receivers()
    config = make_config(webhook=webhook([url], allowFrom=["ci-bot"]))
    manager = await started(config, bus, store)
    echo.manager = manager
    try:
        async with await _client(manager) as client:
            response = await client.post(
                "/webhook/inbound",
                json={"sender_id": "ci-bot", "chat_id": "builds", "text": "build 12 failed"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        assert response.status_code == 202
        assert response.json() == {"accepted": True}
        await eventually(lambda: bool(out.bodies))
        assert out.bodies[0]["chat_id"] == "builds"
        assert out.bodies[0]["text"] == "echo: build 12 failed"
    finally:
        await manager.stop()


async def test_inbound_files_ride_with_the_message_and_the_kept_text_names_them(
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
    eventually: Callable[..., Awaitable[None]],
) -> None:
    from sqlalchemy import select

    from vikingbot.store.tables import inbound_messages

    manager = await started(make_config(webhook=webhook([], allowFrom=["ci-bot"])), bus, store)
    pdf = b"%PDF-1.4 build log"
    body = {"sender_id": "ci-bot", "chat_id": "builds", "text": "",
            "files": [encode_file("log.pdf", pdf, "application/pdf")]}  # fmt: skip
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with await _client(manager) as client:
            bad = {**body, "files": [{"name": "x.pdf", "data": "not base64!"}]}
            refused = await client.post("/webhook/inbound", json=bad, headers=auth)
            response = await client.post("/webhook/inbound", json=body, headers=auth)
        assert refused.status_code == 400
        assert refused.json()["error"] == "files[0]: 'data' is not valid base64"
        assert response.status_code == 202
        await eventually(lambda: bool(echo.seen))
        (msg,) = echo.seen
        assert msg.text == "" and [a.name for a in msg.attachments] == ["log.pdf"]
        assert await msg.attachments[0].fetch(1000) == pdf
        with store.engine.connect() as conn:
            (kept,) = conn.execute(select(inbound_messages.c.text)).scalars().all()
        # the files are not in the database: a restart's turn is told they were lost
        assert kept == "[1 file(s) sent with this message were lost in a restart: log.pdf]"
    finally:
        await manager.stop()


@pytest.mark.parametrize(
    ("headers", "body", "status", "error"),
    [
        ({}, {"sender_id": "ci-bot", "chat_id": "c", "text": "x"}, 401, "bearer token"),
        (
            {"Authorization": "Bearer wrong"},
            {"sender_id": "ci-bot", "chat_id": "c", "text": "x"},
            401,
            "bearer",
        ),
        (
            {"Authorization": f"Basic {TOKEN}"},
            {"sender_id": "ci-bot", "chat_id": "c", "text": "x"},
            401,
            "bearer",
        ),
        (
            {"Authorization": f"Bearer {TOKEN}"},
            {"sender_id": "ci-bot", "text": "x"},
            400,
            "chat_id",
        ),
        (
            {"Authorization": f"Bearer {TOKEN}"},
            {"sender_id": "ci-bot", "chat_id": "c", "text": ""},
            400,
            "text",
        ),
        ({"Authorization": f"Bearer {TOKEN}"}, ["not", "an", "object"], 400, "JSON object"),
        (
            {"Authorization": f"Bearer {TOKEN}"},
            {"sender_id": "stranger", "chat_id": "c", "text": "x"},
            403,
            "not allowed",
        ),
    ],
)
async def test_inbound_refusals(
    headers: dict[str, str],
    body: Any,
    status: int,
    error: str,
    store: Any,
    bus: MessageBus,
    make_config: Callable[..., Config],
) -> None:
    manager = await started(make_config(webhook=webhook([], allowFrom=["ci-bot"])), bus, store)
    try:
        async with await _client(manager) as client:
            response = await client.post("/webhook/inbound", json=body, headers=headers)
        assert response.status_code == status
        assert error in response.json()["error"]
        if status == 403:
            [event] = store.audit_events(action="inbound.refuse")
            assert (event["actor"], event["subject"]) == ("channel:webhook", "stranger")
    finally:
        await manager.stop()


async def test_inbound_body_too_large_and_not_json(
    store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    manager = await started(make_config(webhook=webhook([], allowFrom=["*"])), bus, store)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with await _client(manager) as client:
            over = b"x" * (MAX_BODY_BYTES + 1)  # the cap that lets files in (48 MiB)
            big = await client.post("/webhook/inbound", content=over, headers=auth)
            bad = await client.post("/webhook/inbound", content=b"{nope", headers=auth)
        assert big.status_code == 413
        assert bad.status_code == 400
    finally:
        await manager.stop()


async def test_inbound_is_off_without_a_token_or_when_disabled(
    store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    body = {"sender_id": "a", "chat_id": "c", "text": "x"}
    manager = await started(make_config(webhook={"enabled": True, "allowFrom": ["*"]}), bus, store)
    try:
        async with await _client(manager) as client:
            response = await client.post(
                "/webhook/inbound", json=body, headers={"Authorization": "Bearer "}
            )
        assert response.status_code == 403
        assert "inbound_token" in response.json()["error"]
    finally:
        await manager.stop()
    manager = await started(make_config(), bus, store)
    try:
        async with await _client(manager) as client:
            response = await client.post("/webhook/inbound", json=body)
        assert response.status_code == 404
    finally:
        await manager.stop()


async def test_behind_the_gateway_token_the_channel_route_checks_its_own(
    store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    from vikingbot.gateway.server import build_app

    async def health() -> dict[str, Any]:
        return {}

    manager = await started(make_config(webhook=webhook([], allowFrom=["ci-bot"])), bus, store)
    try:
        routes = manager.routes()
        app = build_app(
            health=health,
            metrics=bytes,
            token="gateway-token",
            extra_routes=routes,
            self_authenticating=tuple(f"{route.path}/" for route in routes),
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            body = {"sender_id": "ci-bot", "chat_id": "c", "text": "x"}
            inbound = await client.post(
                "/webhook/inbound", json=body, headers={"Authorization": f"Bearer {TOKEN}"}
            )
            metrics = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert inbound.status_code == 202  # the channel's own token, not the gateway's
        assert metrics.status_code == 401  # the channel's token opens nothing else
    finally:
        await manager.stop()


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 50_000,  # nested deeper than the JSON decoder recurses
        b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
        b'{"sender_id": "u1", "chat_id": "c1", "text": "\\ud800 lone surrogate"}',
        b'{"sender_id": ["u1"], "chat_id": "c1", "text": "hi"}',
        b'{"sender_id": "u1", "chat_id": {"deep": [[[[]]]]}, "text": "hi"}',
        b"\xff\xfe\x00{",
        b"null",
        b'"just a string"',
    ],
)
async def test_malformed_inbound_bodies_are_400_never_500(
    store: Any, bus: MessageBus, make_config: Callable[..., Config], body: bytes
) -> None:
    manager = await started(make_config(webhook=webhook([], allowFrom=["*"])), bus, store)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with await _client(manager) as client:
            response = await client.post("/webhook/inbound", content=body, headers=auth)
        assert response.status_code == 400, response.text
        assert response.json()["error"]
    finally:
        await manager.stop()
