"""A turn's deliverer (delivery/adapter.TurnDelivery): its options, through a real DeliveryService."""

from __future__ import annotations

from pathlib import Path

import pytest

from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.delivery.adapter import TurnDelivery
from vikingbot.delivery.inbox import Inbox
from vikingbot.delivery.service import DeliveryService
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey
from vikingbot.store.db import StateStore
from vikingbot.store.leases import LeaseLost
from vikingbot.tools.base import DeliveryStatus


@pytest.fixture
def service(store: StateStore, tmp_path: Path) -> DeliveryService:
    clock = FakeClock()
    sessions = SessionStore(tmp_path / "sessions", clock=clock)
    return DeliveryService(Config(), store=store, sessions=sessions, clock=clock)


def slot_texts(service: DeliveryService, slot: str) -> list[str]:
    items = Inbox(service.store, service.clock).items(slot=slot)
    return sorted(item.text for item in items)


async def test_a_run_repeated_with_stable_keys_sends_each_text_once(
    service: DeliveryService,
) -> None:
    first = ("rain at noon", "wind at six")
    again = ("hail at nine", "rain at noon", "wind at six")  # the same run after a crash
    for texts in (first, again):
        deliver = TurnDelivery(
            service, source="heartbeat:w", target="dashboard:hb", run_id="hb-1", stable_keys=True
        )
        for text in texts:
            await deliver(text)
    assert slot_texts(service, "hb") == ["hail at nine", "rain at noon", "wind at six"]


async def test_a_lost_fence_sends_nothing(service: DeliveryService) -> None:
    async def fence(doing: str) -> None:
        raise LeaseLost(f"another gateway took the unit over; cannot {doing}")

    deliver = TurnDelivery(
        service, source="heartbeat:w", target="dashboard:hb", run_id="hb-2", fence=fence
    )
    with pytest.raises(LeaseLost):
        await deliver("late result")
    assert slot_texts(service, "hb") == []
    assert deliver.sends == []


async def test_a_chat_turn_answers_its_sink_and_resolves_a_target(
    service: DeliveryService,
) -> None:
    heard: list[str] = []

    async def sink(text: str) -> DeliveryStatus:
        heard.append(text)
        return "delivered"

    deliver = TurnDelivery.for_chat(service, SessionKey("cli", "default", "local"), sink=sink)
    assert await deliver("to this chat") == "delivered"
    assert await deliver("to a slot", "dashboard:notes") == "inboxed"
    assert heard == ["to this chat"]
    assert slot_texts(service, "notes") == ["to a slot"]


async def test_a_refused_target_is_recorded_as_refused(service: DeliveryService) -> None:
    deliver = TurnDelivery(service, source="cron:job", target="telegram:42", run_id="c-1")
    status = await deliver("build is red")
    assert deliver.sends == ["refused"]  # the channel is not enabled; the inbox has it
    assert status == "inboxed"
