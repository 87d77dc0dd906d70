"""A message on the wire when its gateway died (issue 14): at least once, and known.

Gateway A's send is held by the fake platform (it took the message, or not, and A
dies waiting for the answer: its task is cancelled and its registry row goes
silent, as after a SIGKILL). Gateway B's outbox sweep takes the row over. The row
says it was possibly sent: B sends it again from the piece in doubt, logs a
warning and counts it (``vikingbot_outbox_resent_after_crash_total``), or, on
Slack, finds the piece in the chat's history by its metadata and does not send it
again. On SQLite and PostgreSQL, with the real channel manager and channels
against the loopback fakes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from loguru import logger
from sqlalchemy import update

from tests.support.databases import SharedDb
from tests.support.fake_slack import FakeSlack
from tests.support.fake_telegram import FakeTelegram
from tests.support.outbound import send_reply
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.channels.text import split_text
from vikingbot.clock import SystemClock
from vikingbot.config.schema import Config
from vikingbot.delivery.outbox import Outbox
from vikingbot.delivery.types import OutboundMessage
from vikingbot.gateway.registry import GatewayRegistry
from vikingbot.metrics import Metrics
from vikingbot.store import StateStore
from vikingbot.store.tables import gateways

CHAT = "4242"
SLACK_DM = "D0OWNER"


@pytest.fixture
def stores(shared_db: SharedDb) -> Iterator[list[StateStore]]:
    opened = [shared_db.open() for _ in range(3)]
    yield opened
    for store in opened:
        store.close()


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    """The channel manager's warnings (the outbox's)."""
    lines: list[str] = []
    sink = logger.add(
        lambda m: lines.append(m.record["message"]),
        level="WARNING",
        filter="vikingbot.channels.manager",
    )
    yield lines
    logger.remove(sink)


def _config(**channels: Any) -> Config:
    return Config.model_validate(
        {"bot": {"channels": {"cli": {"enabled": False}, "sendRetries": 0, **channels}}}
    )


def _silent(store: StateStore, gateway_id: str) -> None:
    """Make a gateway look dead: no beat for a minute (its process was killed)."""
    with store.engine.begin() as conn:
        row = conn.execute(gateways.select().where(gateways.c.id == gateway_id)).one()
        conn.execute(
            update(gateways)
            .where(gateways.c.id == gateway_id)
            .values(seen_at=row.seen_at - timedelta(seconds=60))
        )


@asynccontextmanager
async def _gateway(store: StateStore, name: str, config: Config) -> AsyncIterator[ChannelManager]:
    GatewayRegistry(store, SystemClock(), gateway_id=name).register()
    manager = ChannelManager(config, bus=MessageBus(), store=store, sender=name)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.stop()


async def _dies_while_sending(
    store: StateStore, config: Config, msg: OutboundMessage, held: Any
) -> None:
    """Gateway A sends ``msg`` and is killed while the platform holds an answer."""
    async with _gateway(store, "gw-a", config) as a:
        sending = asyncio.create_task(send_reply(a, msg))
        await held()
        sending.cancel()  # the process is gone: nothing more of this send is written
        await asyncio.gather(sending, return_exceptions=True)
    _silent(store, "gw-a")


def _texts(fake: FakeTelegram) -> list[str]:
    return [m["text"] for m in fake.sent]


async def test_a_long_message_cut_off_mid_piece_is_resent_from_that_piece(
    stores: list[StateStore], warnings: list[str]
) -> None:
    fake = FakeTelegram()
    text = "\n\n".join(f"part {i} " + "y" * 3000 for i in range(3))
    pieces = split_text(text, 4096)
    assert len(pieces) == 3
    with fake.serve() as api:
        config = _config(telegram={"enabled": True, "token": fake.token, "apiBase": api})
        fake.stall_next_send(skip=1)  # piece 1 goes through; piece 2 is taken, then A dies
        msg = OutboundMessage("telegram", CHAT, text, dedupe_key="hb:run-7")
        await _dies_while_sending(stores[0], config, msg, fake.wait_stalled)
        assert _texts(fake) == pieces[:2]
        row = Outbox(stores[1]).get("hb:run-7")
        assert row is not None and row.possibly_sent and row.parts_sent == 1

        async with _gateway(stores[1], "gw-b", config) as b:
            assert await b.wait_recovered() == 1
        # piece 1 was recorded: not again; piece 2 was in doubt: again; then piece 3
        assert _texts(fake) == [pieces[0], pieces[1], pieces[1], pieces[2]]
    row = Outbox(stores[1]).get("hb:run-7")
    assert row is not None and row.status == "sent" and row.taken_in_flight == 1
    assert b.metrics == {"resent_after_crash_total": 1, "found_after_crash_total": 0}
    assert any("hb:run-7 (part 2/3) may already be in telegram:4242" in w for w in warnings)
    metrics = Metrics()
    metrics.add_dict_source("vikingbot_outbox", lambda: b.metrics)  # as the gateway does
    assert b"vikingbot_outbox_resent_after_crash_total 1.0" in metrics.render()


async def test_a_message_whose_every_piece_was_recorded_is_not_sent_again(
    stores: list[StateStore], warnings: list[str]
) -> None:
    """The sender died after recording its last piece, before marking the row sent."""
    fake = FakeTelegram()
    text = "\n\n".join(f"part {i} " + "y" * 3000 for i in range(2))
    outbox = Outbox(stores[0], sender="gw-a")
    GatewayRegistry(stores[0], SystemClock(), gateway_id="gw-a").register()
    row = outbox.claim(OutboundMessage("telegram", CHAT, text), "hb:run-8")
    outbox.part_sent(row, 1)
    outbox.part_sent(row, 2)
    _silent(stores[0], "gw-a")
    with fake.serve() as api:
        config = _config(telegram={"enabled": True, "token": fake.token, "apiBase": api})
        async with _gateway(stores[1], "gw-b", config) as b:
            assert await b.wait_recovered() == 1
    assert fake.sent == [] and b.metrics["resent_after_crash_total"] == 0
    assert warnings == []
    done = Outbox(stores[1]).get("hb:run-8")
    assert done is not None and done.status == "sent"


@pytest.mark.parametrize("thread", [None, "1700000000.000100"])
async def test_slack_shows_the_message_arrived_so_it_is_not_sent_again(
    stores: list[StateStore], warnings: list[str], thread: str | None
) -> None:
    fake = FakeSlack()
    with fake.serve() as api:
        section = {"enabled": True, "botToken": fake.bot_token, "apiBase": api}
        config = _config(slack=section)
        fake.stall_next_post()  # Slack took it; A died waiting for the answer
        msg = OutboundMessage("slack", SLACK_DM, "Disk is 91% full.", thread=thread)
        await _dies_while_sending(stores[0], config, msg, fake.wait_stalled)
        assert len(fake.posts) == 1
        async with _gateway(stores[1], "gw-b", config) as b:
            assert await b.wait_recovered() == 1
        assert [p["text"] for p in fake.posts] == ["Disk is 91% full."]
        assert fake.history_calls == 1
    assert b.metrics == {"resent_after_crash_total": 0, "found_after_crash_total": 1}
    assert warnings == []
    (row,) = Outbox(stores[1]).rows()
    assert row.status == "sent" and row.taken_in_flight == 1


async def test_slack_without_the_message_gets_it_again_with_a_warning(
    stores: list[StateStore], warnings: list[str]
) -> None:
    fake = FakeSlack()
    with fake.serve() as api:
        config = _config(slack={"enabled": True, "botToken": fake.bot_token, "apiBase": api})
        fake.stall_next_post(take=False)  # lost on the way: Slack never got it
        msg = OutboundMessage("slack", SLACK_DM, "Backup failed.", dedupe_key="cron:backup:1")
        await _dies_while_sending(stores[0], config, msg, fake.wait_stalled)
        assert fake.posts == []
        async with _gateway(stores[1], "gw-b", config) as b:
            assert await b.wait_recovered() == 1
        assert [p["text"] for p in fake.posts] == ["Backup failed."]
        assert fake.posts[0]["metadata"] == {
            "event_type": "vikingbot_outbox",
            "event_payload": {"key": "cron:backup:1"},
        }
    assert b.metrics == {"resent_after_crash_total": 1, "found_after_crash_total": 0}
    assert any("cron:backup:1 may already be in slack:D0OWNER" in w for w in warnings)


def test_a_row_the_sweep_took_but_lost_to_another_gateway_is_not_sent(
    stores: list[StateStore],
) -> None:
    """A claimed a dead gateway's rows, then looked dead itself and C took them:
    A's mark before sending (``Outbox.begin``) finds the row is no longer its own."""
    x = Outbox(stores[0], sender="gw-x")
    GatewayRegistry(stores[0], SystemClock(), gateway_id="gw-x").register()
    x.claim(OutboundMessage("telegram", CHAT, "left by x"), "run-1")
    _silent(stores[0], "gw-x")
    for store, name in ((stores[1], "a"), (stores[2], "c")):
        GatewayRegistry(store, SystemClock(), gateway_id=name).register()
    a, c = Outbox(stores[1], sender="a"), Outbox(stores[2], sender="c")
    (taken,) = a.claim_pending(["telegram"])
    assert taken.possibly_sent  # x was sending it when it died
    _silent(stores[1], "a")
    (again,) = c.claim_pending(["telegram"])
    assert a.begin(taken) is None
    begun = c.begin(again)
    assert begun is not None and begun.taken_in_flight == 1
    assert Outbox(stores[2]).get("run-1").taken_in_flight == 1  # type: ignore[union-attr]
