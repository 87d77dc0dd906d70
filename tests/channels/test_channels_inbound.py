"""Accepted inbound messages kept until answered: who takes a crashed gateway's messages."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert
from starlette.applications import Starlette

from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.channels.inbound import (
    GAVE_UP,
    MAX_ATTEMPTS,
    InboundStore,
    apology,
    gave_up,
    row_id_of,
)
from vikingbot.channels.manager import ChannelManager
from vikingbot.clock import FakeClock
from vikingbot.store.leases import default_time_source, store_now
from vikingbot.store.tables import gateways

TOKEN = "s3cret-inbound"
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _msg(text: str, chat: str = "c1") -> InboundMessage:
    return InboundMessage(channel="webhook", chat_id=chat, sender_id="u1", text=text)


def _gateway(store: Any, gid: str, *, alive: bool) -> None:
    """A registry row seen just now (by the clock liveness is judged by on this backend)."""
    with store.engine.begin() as conn:
        now = store_now(conn, FakeClock(NOW), default_time_source(store))
        conn.execute(
            insert(gateways).values(
                id=gid,
                host="elsewhere",
                pid=1,
                started_at=now,
                seen_at=now,
                stopped_at=None if alive else now,
            )
        )


def test_a_dead_gateways_messages_are_taken_once_in_order_a_live_ones_are_not(
    store: Any,
) -> None:
    inbound = InboundStore(store, FakeClock(NOW))
    _gateway(store, "gw-live", alive=True)
    _gateway(store, "gw-dead", alive=False)
    mine = inbound.keep(_msg("still being answered"), "gw-live")
    lost = [inbound.keep(_msg(f"lost {n}", chat=f"c{n}"), "gw-dead") for n in range(3)]
    never = inbound.keep(_msg("taker never registered"), "gw-gone")

    taken = inbound.take_orphans("gw-new", "webhook")

    assert [m.text for m in taken] == ["lost 0", "lost 1", "lost 2", never.text]
    assert [row_id_of(m) for m in taken] == [row_id_of(m) for m in [*lost, never]]
    assert taken[1].chat_id == "c1" and taken[1].sender_id == "u1"
    assert row_id_of(mine) not in [row_id_of(m) for m in taken]
    # a second gateway looking at the same moment finds nothing: "gw-new" never registered
    # either, but the rows are no longer the dead gateway's
    _gateway(store, "gw-new", alive=True)
    assert inbound.take_orphans("gw-other", "webhook") == []
    assert inbound.counts() == {"pending": 5}


def test_answered_messages_are_not_taken_again(store: Any) -> None:
    inbound = InboundStore(store, FakeClock(NOW))
    kept = inbound.keep(_msg("hello"), "gw-dead")
    row = row_id_of(kept)
    assert row is not None
    assert kept.metadata["run_id"] == f"inbound-{row}"  # replies' dedupe keys start so
    inbound.answered(row)
    assert inbound.take_orphans("gw-new", "webhook") == []
    assert inbound.counts("webhook") == {"answered": 1}


def test_a_message_that_keeps_crashing_the_gateway_is_answered_with_an_apology(
    store: Any,
) -> None:
    inbound = InboundStore(store, FakeClock(NOW))
    kept = inbound.keep(_msg("poison"), "gw-0")
    row = row_id_of(kept)
    assert row is not None
    for n in range(20):  # queued by gateways that died before they got to it: no try spent
        (taken,) = inbound.take_orphans(f"gw-queued-{n}", "webhook")
        assert taken.text == "poison" and gave_up(taken) is None
    for n in range(MAX_ATTEMPTS):  # each gateway began a turn on it, then crashed
        inbound.started(row)
        if n < MAX_ATTEMPTS - 1:
            (taken,) = inbound.take_orphans(f"gw-{n}", "webhook")
            assert gave_up(taken) is None
    (last,) = inbound.take_orphans("gw-last", "webhook")
    assert gave_up(last) == MAX_ATTEMPTS
    assert apology(last, MAX_ATTEMPTS) == (
        'Sorry, I could not answer your message "poison": answering it stopped the bot '
        "5 times. Please send it again, perhaps in other words."
    )
    assert inbound.counts() == {"pending": 1}  # answered (the apology) like any other


async def test_the_202_comes_after_the_message_is_kept_and_a_restart_answers_it(
    store: Any, bus: MessageBus, make_config: Any
) -> None:
    config = make_config(
        webhook={
            "enabled": True,
            "outboundUrls": ["http://127.0.0.1:9/unused"],
            "inboundToken": TOKEN,
            "allowFrom": ["*"],
        }
    )
    first = ChannelManager(config, bus=bus, store=store, sender="gw-first")
    await first.start()
    try:
        app = Starlette(routes=first.routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            response = await client.post(
                "/webhook/inbound",
                json={"sender_id": "u1", "chat_id": "c1", "text": "are you there?"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        assert response.status_code == 202
        assert InboundStore(store).counts() == {"pending": 1}  # on disk before the 202
        queued = await bus.next_inbound()
        assert queued.text == "are you there?" and row_id_of(queued) is not None
    finally:
        await first.stop()  # "crashed" before answering: never registered, so not alive

    later = MessageBus()
    second = ChannelManager(config, bus=later, store=store, sender="gw-second")
    await second.start()
    try:
        again = await later.next_inbound()  # the sweep at start queues it for this gateway
        assert (again.text, row_id_of(again)) == (queued.text, row_id_of(queued))
        await second.answered(again)
        assert InboundStore(store).counts() == {"answered": 1}
    finally:
        await second.stop()


async def test_while_the_database_is_away_a_message_is_refused_503_not_accepted(
    pg_url: str, bus: MessageBus, make_config: Any
) -> None:
    """A 202 is a promise the message is stored: when it cannot be, the answer is 503
    with Retry-After (the sender tries again), and nothing reaches the agent."""
    import uuid

    import psycopg

    from tests.support.pg_proxy import PgProxy
    from vikingbot.store.db import StateStore

    schema = f"test_{uuid.uuid4().hex[:16]}"
    StateStore.open(pg_url, schema=schema).close()
    config = make_config(
        webhook={
            "enabled": True,
            "outboundUrls": ["http://127.0.0.1:9/unused"],
            "inboundToken": TOKEN,
            "allowFrom": ["*"],
        }
    )
    body = {"sender_id": "u1", "chat_id": "c1", "text": "are you there?"}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with PgProxy() as proxy:
            url = proxy.url(pg_url) + f"?options=-csearch_path%3D{schema}"
            store = StateStore.open(url)
            manager = ChannelManager(config, bus=bus, store=store, sender="gw-1")
            await manager.start()
            try:
                app = Starlette(routes=manager.routes())
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
                    proxy.cut()
                    refused = await client.post("/webhook/inbound", json=body, headers=headers)
                    proxy.restore()
                    accepted = await client.post("/webhook/inbound", json=body, headers=headers)
            finally:
                await manager.stop()
                store.close()
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
        assert "try again" in refused.json()["error"]
        assert accepted.status_code == 202
        queued = await bus.next_inbound()
        assert row_id_of(queued) is not None
        assert bus._inbound.empty()  # the refused message never reached the agent
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def test_a_given_up_message_gets_the_apology_and_the_agent_is_not_run(
    tmp_path: Path,
) -> None:
    from tests.support.harness import build_harness
    from vikingbot.gateway.supervisor import Gateway
    from vikingbot.testing.fake_openai import FakeOpenAI, reply

    with FakeOpenAI.start(default=reply("an answer")) as fake:
        async for h in build_harness(tmp_path, fake):
            gw = Gateway(h.rt, say=lambda _line: None)
            poison = replace(
                _msg("make the bot fall over"),
                channel="telegram",
                chat_id="42",
                metadata={"inbound_id": 7, "run_id": "inbound-7", GAVE_UP: MAX_ATTEMPTS},
            )
            await gw.dispatch.answer(poison)
            assert fake.requests == []  # not run again
            [sent] = h.sent
            assert sent.text.startswith('Sorry, I could not answer your message "make the bot')
            assert sent.dedupe_key == "inbound-7:1"  # sent once, whoever answers it
