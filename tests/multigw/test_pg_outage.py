"""A PostgreSQL outage (cut through a loopback TCP proxy): nothing dies, nothing is lost.

The heartbeat loop keeps waiting while the database is away and runs its cycle
once it is back; a reply written during the cut is held and sent once after.
The 30-second cut of the issue is bench/pg_outage.py; here the cut is short.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_telegram import FakeTelegram
from tests.support.outbound import send_reply
from tests.support.pg_proxy import PgProxy
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.clock import SystemClock
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.delivery.types import OutboundMessage
from vikingbot.gateway import compose
from vikingbot.gateway.compose import build_home
from vikingbot.heartbeat.service import GLOBAL, HeartbeatService
from vikingbot.store import StateStore


@pytest.fixture
def proxied(pg_url: str) -> Iterator[tuple[PgProxy, str]]:
    """(proxy, URL of a fresh schema reached through the proxy)."""
    import psycopg

    schema = f"test_{uuid.uuid4().hex[:16]}"
    StateStore.open(pg_url, schema=schema).close()
    with PgProxy() as proxy:
        yield proxy, proxy.url(pg_url) + f"?options=-csearch_path%3D{schema}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _until(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_the_heartbeat_waits_out_an_outage_and_cycles_when_the_database_returns(
    proxied: tuple[PgProxy, str], tmp_path: Path
) -> None:
    proxy, url = proxied
    paths = Paths(
        home=tmp_path, config_file=tmp_path / "config.json", data_dir=tmp_path, database_url=url
    )
    rt = build_home(Config(), paths, clock=SystemClock(), environ={})
    rt.store  # noqa: B018 - open (through the proxy) before the cut
    hb = compose.heartbeat(rt)
    proxy.cut()
    stop = asyncio.Event()
    loop = asyncio.create_task(hb.run_forever(stop))
    try:
        await _until(lambda: hb.store_down_since is not None)
        await asyncio.sleep(0.5)  # a few failed attempts while cut
        assert not loop.done()  # the service did not die
        proxy.restore()
        await _until(lambda: hb.store_down_since is None)
        await _until(lambda: rt_state_cycle(hb) is not None)
    finally:
        stop.set()
        hb.wake()
        await asyncio.wait_for(loop, 10)
        await rt.aclose()


def rt_state_cycle(hb: HeartbeatService) -> object:
    return hb.state.workspace(GLOBAL).last_cycle_at


async def test_a_reply_written_during_the_cut_is_sent_once_after(
    proxied: tuple[PgProxy, str],
) -> None:
    proxy, url = proxied
    fake = FakeTelegram(max_poll_s=0.2)
    with fake.serve() as api:
        store = StateStore.open(url)
        config = Config.model_validate(
            {
                "bot": {
                    "owner": "telegram:42",
                    "channels": {
                        "cli": {"enabled": False},
                        "telegram": {"enabled": True, "token": fake.token, "apiBase": api},
                    },
                }
            }
        )
        bus = MessageBus()
        manager = ChannelManager(config, bus=bus, store=store, sender="gw-a")
        await manager.start()
        try:
            proxy.cut()
            reply = OutboundMessage("telegram", "42", "answer written while cut", dedupe_key="r1")
            sending = asyncio.create_task(send_reply(manager, reply))
            await asyncio.sleep(1.0)
            assert not sending.done() and fake.sent == []  # held, not lost, not failed
            proxy.restore()
            assert await asyncio.wait_for(sending, 30) is True
            assert [m["text"] for m in fake.sent] == ["answer written while cut"]
            row = manager.outbox.get("r1")
            assert row is not None and row.status == "sent"
        finally:
            await manager.stop()
            store.close()
