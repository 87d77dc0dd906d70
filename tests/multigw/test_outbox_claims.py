"""The outbox across gateways: one sender per pending row; a dead sender's rows move on."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import update

from tests.support.databases import SharedDb
from vikingbot.clock import SystemClock
from vikingbot.delivery.outbox import Outbox
from vikingbot.delivery.types import OutboundMessage
from vikingbot.gateway.registry import GatewayRegistry
from vikingbot.store import StateStore
from vikingbot.store.tables import gateways


@pytest.fixture
def stores(shared_db: SharedDb) -> Iterator[list[StateStore]]:
    opened = [shared_db.open() for _ in range(4)]
    yield opened
    for store in opened:
        store.close()


def _gateway(store: StateStore, name: str) -> tuple[GatewayRegistry, Outbox]:
    registry = GatewayRegistry(store, SystemClock(), gateway_id=name)
    registry.register()
    return registry, Outbox(store, sender=name)


def _msg(n: int) -> OutboundMessage:
    return OutboundMessage("telegram", "42", f"message {n}")


def _age(store: StateStore, gateway_id: str, seconds: float) -> None:
    """Make a gateway look silent for ``seconds`` (as if its process had died)."""
    with store.engine.begin() as conn:
        row = conn.execute(gateways.select().where(gateways.c.id == gateway_id)).one()
        conn.execute(
            update(gateways)
            .where(gateways.c.id == gateway_id)
            .values(seen_at=row.seen_at - timedelta(seconds=seconds))
        )


def test_a_live_gateways_pending_message_is_left_to_it(stores: list[StateStore]) -> None:
    _, a = _gateway(stores[0], "gw-a")
    _, b = _gateway(stores[1], "gw-b")
    mine = a.claim(_msg(1), "run-1")
    assert mine.mine and mine.status == "pending"
    theirs = b.claim(_msg(1), "run-1")  # same run delivered twice: gw-b must not send
    assert not theirs.mine and theirs.status == "pending"
    assert b.claim_pending(["telegram"]) == []
    a.mark_sent("run-1")
    assert b.claim(_msg(1), "run-1").status == "sent"


def test_a_dead_gateways_pending_messages_are_picked_up_once(stores: list[StateStore]) -> None:
    _, a = _gateway(stores[0], "gw-a")
    _, b = _gateway(stores[1], "gw-b")
    _, c = _gateway(stores[2], "gw-c")
    for n in range(3):
        a.claim(_msg(n), f"run-{n}")
    a.claim(OutboundMessage("dashboard", "default", "inbox row"), "inbox-1")
    assert b.claim_pending(["telegram"]) == []
    _age(stores[0], "gw-a", 60)  # gw-a stopped beating: dead
    taken = b.claim_pending(["telegram"])
    assert [r.dedupe_key for r in taken] == ["run-0", "run-1", "run-2"]
    assert c.claim_pending(["telegram"]) == []  # gw-b holds them now
    assert not c.claim(_msg(0), "run-0").mine


def test_a_restarted_gateway_takes_over_its_previous_runs_rows_at_once(
    stores: list[StateStore],
) -> None:
    registry, before = _gateway(stores[0], "gw-old")
    before.claim(_msg(1), "run-1")
    registry.stopped()
    _, after = _gateway(stores[0], "gw-new")
    assert [r.dedupe_key for r in after.claim_pending(["telegram"])] == ["run-1"]


def test_racing_gateways_split_a_dead_senders_backlog_without_overlap(
    stores: list[StateStore],
) -> None:
    _, dead = _gateway(stores[0], "gw-dead")
    for n in range(120):
        dead.claim(_msg(n), f"run-{n}")
    _age(stores[0], "gw-dead", 60)
    outboxes = [_gateway(store, f"gw-{i}")[1] for i, store in enumerate(stores)]
    taken: dict[str, list[str]] = {o.sender: [] for o in outboxes}
    barrier = threading.Barrier(len(outboxes))

    def sweep(outbox: Outbox) -> None:
        barrier.wait()
        while rows := outbox.claim_pending(["telegram"], limit=7):
            taken[outbox.sender].extend(r.dedupe_key for r in rows)

    threads = [threading.Thread(target=sweep, args=(o,)) for o in outboxes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    every = [key for keys in taken.values() for key in keys]
    assert sorted(every) == sorted(f"run-{n}" for n in range(120))  # each exactly once
    assert len(set(every)) == len(every)


def test_registry_lists_gateways_and_their_state(stores: list[StateStore]) -> None:
    a, _ = _gateway(stores[0], "gw-a")
    b, _ = _gateway(stores[1], "gw-b")
    c, _ = _gateway(stores[2], "gw-c")
    c.stopped()
    _age(stores[1], "gw-b", 60)
    assert [(g.id, g.state) for g in a.list()] == [("gw-a", "running"), ("gw-b", "dead")]
    assert [g.state for g in a.list(include_stopped=True)] == ["running", "dead", "stopped"]
    b.beat({"running_turns": 0})
    assert [g.state for g in a.list()] == ["running", "running"]


def test_a_gateway_restarted_after_a_crash_takes_its_old_rows_at_once(
    stores: list[StateStore],
) -> None:
    import subprocess
    import sys

    # a gateway process on this host that died without marking itself stopped
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    crashed = GatewayRegistry(stores[0], SystemClock(), gateway_id="gw-crashed")
    crashed.register()
    with stores[0].engine.begin() as conn:
        conn.execute(update(gateways).where(gateways.c.id == "gw-crashed").values(pid=dead.pid))
    Outbox(stores[0], sender="gw-crashed").claim(_msg(1), "run-1")
    _, restarted = _gateway(stores[1], "gw-new")  # registering reaps the dead local row
    assert [r.dedupe_key for r in restarted.claim_pending(["telegram"])] == ["run-1"]
    assert [g.state for g in restarted_registry_list(stores[1])] == ["stopped", "running"]


def restarted_registry_list(store: StateStore) -> list[object]:
    return GatewayRegistry(store, SystemClock()).list(include_stopped=True)  # type: ignore[return-value]
