"""The ``http`` checker against a scripted server on loopback."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from vikingbot.config.schema import CheckerConfig
from vikingbot.testing.server import serve_app


@dataclass
class Script:
    body: bytes = b"status: ok"
    status: int = 200
    content_type: str = "text/plain; charset=utf-8"
    etag: str | None = None
    delay_s: float = 0.0
    echo_header: str | None = None
    seen: list[Request] = field(default_factory=list)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[Script]]]:
    holder = [Script()]

    async def page(request: Request) -> Response:
        script = holder[0]
        script.seen.append(request)
        if script.delay_s:
            await asyncio.sleep(script.delay_s)
        body = script.body
        if script.echo_header:
            body += f" {script.echo_header}={request.headers.get(script.echo_header)}".encode()
        headers = {"ETag": script.etag} if script.etag else {}
        return Response(body, script.status, headers, media_type=script.content_type)

    app = Starlette(routes=[Route("/{path:path}", page)])
    with serve_app(app) as base:
        yield base, holder


@pytest.fixture
def site(server: tuple[str, list[Script]]) -> tuple[str, Script]:
    base, holder = server
    holder[0] = Script()
    return base, holder[0]


def http(url: str, **options: object) -> CheckerConfig:
    return CheckerConfig.model_validate({"kind": "http", "url": url, **options})


async def test_a_body_is_work_and_context(run, site) -> None:
    base, script = site
    script.body = b"Build #42 failed"
    result = await run(http(f"{base}/status"))
    assert result.has_work
    assert result.context == "Build #42 failed"
    assert result.error is None


async def test_an_empty_body_is_no_work(run, site) -> None:
    base, script = site
    script.body = b"  \n"
    result = await run(http(f"{base}/status"))
    assert not result.has_work and result.error is None


async def test_signature_follows_the_body(run, site) -> None:
    base, script = site
    config = http(f"{base}/feed")
    first = await run(config)
    again = await run(config)
    script.body = b"status: degraded"
    changed = await run(config)
    assert first.signature == again.signature
    assert changed.signature != first.signature


async def test_signature_follows_the_etag_when_there_is_one(run, site) -> None:
    base, script = site
    config = http(f"{base}/feed")
    script.etag = '"v1"'
    first = await run(config)
    script.body = b"same version, new timestamp in the body"
    same_tag = await run(config)
    script.etag = '"v2"'
    new_tag = await run(config)
    assert first.signature == same_tag.signature
    assert new_tag.signature != first.signature


async def test_an_error_status_fails_open_or_closed(run, site) -> None:
    base, script = site
    script.status = 503
    opened = await run(http(f"{base}/feed?key=abc"))
    closed = await run(http(f"{base}/feed", fail="closed"))
    assert opened.has_work and opened.failed_open
    assert "HTTP 503" in (opened.error or "")
    assert "key=abc" not in (opened.error or "")
    assert not closed.has_work and not closed.failed_open


async def test_header_references_are_sent_and_redacted(run, site) -> None:
    base, script = site
    script.echo_header = "authorization"
    config = http(f"{base}/me", headers={"Authorization": "Bearer ${STATUS_TOKEN}"})
    result = await run(config, environ={"STATUS_TOKEN": "tok-123456"})
    assert script.seen[-1].headers["authorization"] == "Bearer tok-123456"
    assert result.has_work
    assert "tok-123456" not in (result.context or "")
    assert result.context == "status: ok authorization=***"


async def test_a_missing_secret_fails_open_naming_it(run, site) -> None:
    base, script = site
    config = http(f"{base}/me", headers={"Authorization": "Bearer ${STATUS_TOKEN}"})
    result = await run(config, environ={})
    assert result.failed_open
    assert "STATUS_TOKEN is not set" in (result.error or "")
    assert script.seen == []


async def test_large_bodies_are_cut(run, site) -> None:
    base, script = site
    script.body = b"a" * 5000
    result = await run(http(f"{base}/big", maxBytes=1000))
    assert result.has_work
    assert "body cut at 1000 bytes" in (result.context or "")


async def test_binary_content_is_described_not_dumped(run, site) -> None:
    base, script = site
    script.body = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100
    script.content_type = "image/png"
    result = await run(http(f"{base}/chart.png"))
    assert result.has_work
    assert result.context == "(non-text content: image/png, 108 bytes)"


async def test_scope_is_quoted_into_the_url(run, site) -> None:
    base, script = site
    await run(http(f"{base}/repos/{{scope}}/status"), "octo/app")
    assert script.seen[-1].scope["raw_path"] == b"/repos/octo%2Fapp/status"


async def test_a_slow_server_times_out(run, site) -> None:
    base, script = site
    script.delay_s = 0.6
    result = await run(http(f"{base}/slow", timeoutS=0.2))
    assert result.failed_open
    assert "timed out" in (result.error or "") or "Timeout" in (result.error or "")


async def test_an_unreachable_server_fails_open(run) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await run(http(f"http://127.0.0.1:{port}/"))
    assert result.failed_open
    assert "ConnectError" in (result.error or "")


async def test_only_get_is_allowed(run, site) -> None:
    base, _ = site
    result = await run(http(f"{base}/hook", method="POST"))
    assert result.failed_open
    assert "only GET" in (result.error or "")
