"""Supervised services: a crash is logged, told to the owner once, restarted with backoff,
and /health says what is wrong meanwhile (real faults: a refusing server, a model that is down)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.harness import build_harness, with_tasks
from vikingbot.gateway.supervisor import Gateway
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply


async def until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_a_crashing_service_restarts_with_backoff_and_the_owner_hears_once(
    tmp_path: Path,
) -> None:
    # a platform that refuses connections (bound, not listening) until it comes up
    platform = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    platform.bind(("127.0.0.1", 0))
    port = platform.getsockname()[1]
    connected = asyncio.Event()

    async def poller() -> None:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()
        connected.set()
        await gw.stop_event.wait()

    with FakeOpenAI.start() as fake:
        async for h in build_harness(tmp_path, fake):
            gw = Gateway(h.rt, say=lambda _line: None)
            gw.services.first_delay_s, gw.services.max_delay_s = 0.02, 0.2
            state = gw.services.spawn("poller", poller, "polling the platform")
            try:
                await until(lambda s=state: s.state == "restarting")
                health = gw.health()
                assert health["status"] == "degraded"
                assert any(
                    p.startswith("service poller restarting after: ConnectionRefusedError")
                    for p in health["problems"]
                )
                assert health["services"]["poller"]["state"] == "restarting"
                await until(lambda s=state: s.restarts >= 3)  # it keeps trying
                platform.listen()
                await asyncio.wait_for(connected.wait(), 20)
                await until(lambda s=state: s.state == "running")
                assert gw.health()["status"] == "ok"
                told = [t for t in h.texts() if "poller service crashed" in t]
                assert len(told) == 1  # a crash loop is one notice, to the owner
                assert [m.chat_id for m in h.sent] == ["42"]
                assert "ConnectionRefusedError" in told[0]
            finally:
                gw.stop_event.set()
                await asyncio.wait_for(asyncio.gather(*gw.services.tasks()), 10)
                platform.close()
            assert state.state == "stopped"


async def test_health_is_degraded_while_the_model_provider_is_down(tmp_path: Path) -> None:
    with FakeOpenAI.start(default=error(503, "overloaded")) as fake:
        async for h in build_harness(tmp_path, fake):
            h.user_session()
            h.write(with_tasks("- Check the mail"))
            gw = Gateway(h.rt, say=lambda _line: None)
            gw.heartbeat = h.hb  # the gateway's heartbeat, cycled by hand here
            await h.cycle()
            health = gw.health()
            assert health["status"] == "degraded"
            assert health["problems"] == ["model provider down: " + h.hb.health.error]  # type: ignore[operator]
            assert health["database"]["reachable"] is True
            fake.default = reply("HEARTBEAT_OK")
            h.clock.advance(hours=1)  # past the next try
            await h.cycle()
            assert gw.health()["status"] == "ok"
            assert gw.health()["problems"] == []
