"""Feishu with an Encrypt Key: events encrypted and signed as the platform sends them
(lark-oapi's own AESCipher decrypts them), forged ones refused in one log line; every
HTTP entry point's body capped before it is read (``gateway/bodycap.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from loguru import logger
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.channels.test_channels_feishu import ALICE, DM, config, fake, running, store  # noqa: F401
from tests.support.fake_feishu import FakeFeishu, encrypt
from vikingbot.bus import MessageBus
from vikingbot.gateway.bodycap import BodyCap, limit_for
from vikingbot.store import StateStore
from vikingbot.testing.server import serving

KEY = "encrypt-key-of-the-app"


async def test_the_sdk_decrypts_what_the_fake_platform_encrypts() -> None:
    # async: lark_oapi makes an event loop at import when none runs (never closed)
    from lark_oapi.core.utils.decryptor import AESCipher

    assert AESCipher(KEY).decrypt_str(encrypt('{"a": "\\u00e9"}', KEY)) == '{"a": "\\u00e9"}'


async def test_an_encrypted_signed_event_is_answered_and_a_forged_one_is_one_line(
    fake: tuple[FakeFeishu, str],  # noqa: F811
    store: StateStore,  # noqa: F811
    bus: MessageBus,
    echo: Any,
    capfd: pytest.CaptureFixture[str],
) -> None:
    feishu, domain = fake
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    cfg = config(feishu, domain, allowFrom=[ALICE], encryptKey=KEY)
    try:
        async with running(cfg, store, bus=bus, retry_delay_s=0.05) as manager:
            echo.manager = manager
            async with serving(BodyCap(Starlette(routes=manager.routes()))) as gateway:
                url = f"{gateway}/feishu/events"
                forged = feishu.event(chat_id=DM, open_id=ALICE, text="forged")
                answer = await feishu.push_encrypted(url, forged, KEY, sign_with="guessed")
                assert answer.status_code == 401
                plain = await feishu.push(url, feishu.event(chat_id=DM, open_id=ALICE, text="p"))
                assert plain.status_code == 401  # unencrypted, unsigned: refused too
                hello = feishu.event(chat_id=DM, open_id=ALICE, text="sealed hello")
                assert (await feishu.push_encrypted(url, hello, KEY)).status_code == 200
                (sent,) = await feishu.wait_sent(1)
                assert '"echo: sealed hello"' in sent["body"]["content"]
    finally:
        logger.remove(sink)
    assert [m.text for m in echo.seen] == ["sealed hello"]
    refused = [line for line in lines if line.startswith("feishu: refused a request")]
    assert len(refused) == 2 and "signature verification failed" in refused[0]
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err


@pytest.fixture
async def capped() -> AsyncIterator[str]:
    async def echo_size(request: Request) -> JSONResponse:
        return JSONResponse({"bytes": len(await request.body())})

    routes = [Route(p, echo_size, methods=["POST"]) for p in ("/api/x", "/feishu/events", "/x")]
    async with serving(BodyCap(Starlette(routes=routes))) as base:
        yield base


@pytest.mark.parametrize("path", ["/api/x", "/feishu/events", "/x"])
async def test_a_body_over_its_limit_is_refused_with_or_without_a_length(
    capped: str, path: str
) -> None:
    limit = limit_for(path)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536

    async def status(content: Any) -> int | str:
        """The answer's status; "closed" when the server closed the connection while the
        client was still sending the body it will not read (what a client may see)."""
        async with httpx.AsyncClient(timeout=30) as client:
            try:
                answer = await client.post(capped + path, content=content)
            except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                return "closed"
            assert answer.status_code != 413 or str(limit) in answer.json()["error"]
            return answer.status_code

    async with httpx.AsyncClient(timeout=30) as client:
        ok = await client.post(capped + path, content=b"x" * limit)
        assert ok.json() == {"bytes": limit}
    assert await status(b"x" * (limit + 1)) in (413, "closed")
    assert await status(chunks()) in (413, "closed")
    assert await status(b"x" * 10) == 200  # the gateway still answers
