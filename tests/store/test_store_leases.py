"""Leases: one claimant per key, takeover after expiry, fencing, done slots, skewed clocks.

``target`` (tests/store/conftest.py) is one database on each backend; each claimant
opens its own store on it, as separate gateways would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import select

from vikingbot.clock import FakeClock
from vikingbot.store import StateStore
from vikingbot.store.leases import KEY_MAX, Claim, Held, LeaseLost, Leases, lease_key
from vikingbot.store.tables import audit_events

if TYPE_CHECKING:
    from tests.support.databases import SharedDb as Target


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def stores(target: Target) -> Iterator[list[StateStore]]:
    opened = [target.open() for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def _leases(store: StateStore, clock: FakeClock) -> Leases:
    return Leases(store, clock, time_source="clock")


def _claimed(result: Claim | Held) -> Claim:
    assert isinstance(result, Claim), result
    return result


def test_of_many_racing_claimants_exactly_one_wins(target: Target) -> None:
    opened = [target.open() for _ in range(6)]
    try:
        barrier = threading.Barrier(len(opened))
        results: list[Claim | Held] = []

        def race(i: int) -> None:
            leases = Leases(opened[i], FakeClock())
            barrier.wait()
            for n in range(20):
                results.append(leases.claim(f"hb:ws:task-{n}", f"gw{i}", 60))

        threads = [threading.Thread(target=race, args=(i,)) for i in range(len(opened))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        winners = [r for r in results if isinstance(r, Claim)]
        assert len(results) == 6 * 20
        assert sorted(w.key for w in winners) == sorted(f"hb:ws:task-{n}" for n in range(20))
        held = [r for r in results if isinstance(r, Held)]
        by_key = {w.key: w.owner for w in winners}
        assert all(h.holder in (by_key[h.key], "(being claimed)") for h in held)
    finally:
        for store in opened:
            store.close()


def test_a_live_claim_is_held_even_against_its_own_owner(
    stores: list[StateStore], clock: FakeClock
) -> None:
    a, b = (_leases(s, clock) for s in stores)
    claim = _claimed(a.claim("cron:daily:2026-01-05T12:00", "gw-a", 30))
    assert claim.fence == 1
    assert claim.expires_at == clock.now() + timedelta(seconds=30)
    held = b.claim("cron:daily:2026-01-05T12:00", "gw-b", 30)
    assert held == Held(claim.key, "gw-a", claim.expires_at)
    assert isinstance(a.claim(claim.key, "gw-a", 30), Held)
    assert b.holder(claim.key) == held


def test_an_expired_claim_is_taken_over_with_a_higher_fence(
    stores: list[StateStore], clock: FakeClock
) -> None:
    a, b = (_leases(s, clock) for s in stores)
    first = _claimed(a.claim("hb:ws:checklist", "gw-a", 30))
    clock.advance(seconds=29)
    assert a.renew(first, 30)  # renewed: now valid until +59 s
    clock.advance(seconds=29)
    assert isinstance(b.claim("hb:ws:checklist", "gw-b", 30), Held)
    clock.advance(seconds=2)
    second = _claimed(b.claim("hb:ws:checklist", "gw-b", 30))
    assert second.fence == first.fence + 1
    assert not a.renew(first, 30)  # the dead holder learns it lost the unit
    a.release(first)  # releasing a lost claim changes nothing
    assert a.holder("hb:ws:checklist") == Held(second.key, "gw-b", second.expires_at)


def test_release_lets_another_claim_at_once(stores: list[StateStore], clock: FakeClock) -> None:
    a, b = (_leases(s, clock) for s in stores)
    first = _claimed(a.claim("housekeeping", "gw-a", 300))
    a.release(first)
    assert a.holder("housekeeping") is None
    assert _claimed(b.claim("housekeeping", "gw-b", 300)).fence == 2


def _written(store: StateStore) -> list[str]:
    with store.engine.connect() as conn:
        return list(
            conn.execute(select(audit_events.c.actor).order_by(audit_events.c.id)).scalars()
        )


def _write_result(conn: object, actor: str, clock: FakeClock) -> None:
    conn.execute(  # type: ignore[attr-defined]
        audit_events.insert().values(
            at=clock.now(), actor=actor, action="unit.result", subject="s", outcome="ok"
        )
    )


def test_a_late_finisher_cannot_overwrite_the_newer_claimants_result(
    stores: list[StateStore], clock: FakeClock
) -> None:
    a, b = (_leases(s, clock) for s in stores)
    old = _claimed(a.claim("hb:ws:task", "gw-a", 10))
    clock.advance(seconds=11)  # gw-a's turn is still running when its lease runs out
    new = _claimed(b.claim("hb:ws:task", "gw-b", 10))
    with b.fenced(new) as conn:
        _write_result(conn, "gw-b", clock)
        assert b.mark_done_in(conn, new)
    lost = r"now held by gw-b \(fence 2\); result not written"
    with pytest.raises(LeaseLost, match=lost), a.fenced(old) as conn:
        _write_result(conn, "gw-a", clock)
    assert not a.mark_done(old)
    assert _written(stores[0]) == ["gw-b"]


def test_an_expired_claim_nobody_took_may_still_finish(
    stores: list[StateStore], clock: FakeClock
) -> None:
    a = _leases(stores[0], clock)
    claim = _claimed(a.claim("hb:ws:slow", "gw-a", 10))
    clock.advance(seconds=60)
    with a.fenced(claim) as conn:
        _write_result(conn, "gw-a", clock)
    assert _written(stores[0]) == ["gw-a"]


def test_a_done_slot_never_fires_again(stores: list[StateStore], clock: FakeClock) -> None:
    a, b = (_leases(s, clock) for s in stores)
    key = "hb:ws:water plants:2026-01-05T09:00:00+00:00"
    claim = _claimed(a.claim(key, "gw-a", 30))
    assert not a.done(key)
    assert a.mark_done(claim)
    assert not a.mark_done(claim)  # only once
    clock.advance(days=3)
    for leases, owner in ((a, "gw-a"), (b, "gw-b")):
        held = leases.claim(key, owner, 30)
        assert isinstance(held, Held) and held.done and held.holder == "gw-a"
    assert b.done(key)
    assert b.holder(key) is not None and b.holder(key).done  # type: ignore[union-attr]
    assert not b.renew(claim, 30)


def test_holders_lists_live_claims_under_a_prefix(
    stores: list[StateStore], clock: FakeClock
) -> None:
    a = _leases(stores[0], clock)
    _claimed(a.claim("channel:telegram:default", "gw-a", 30))
    _claimed(a.claim("channel:slack:default", "gw-b", 5))
    done = _claimed(a.claim("channel:old", "gw-a", 30))
    a.mark_done(done)
    _claimed(a.claim("channelXtelegram", "gw-c", 30))  # "_"/"%" are not wildcards
    _claimed(a.claim("hb:ws:x", "gw-a", 30))
    assert [h.key for h in a.holders("channel:")] == [
        "channel:slack:default",
        "channel:telegram:default",
    ]
    assert [h.key for h in a.holders("channel_")] == []
    clock.advance(seconds=10)
    assert [(h.key, h.holder) for h in a.holders("channel:")] == [
        ("channel:telegram:default", "gw-a")
    ]


def test_prune_drops_only_long_expired_leases(stores: list[StateStore], clock: FakeClock) -> None:
    a = _leases(stores[0], clock)
    old = _claimed(a.claim("old", "gw-a", 1))
    a.mark_done(old)
    clock.advance(days=40)
    _claimed(a.claim("new", "gw-a", 30))
    assert a.prune(timedelta(days=30).total_seconds()) == 1
    assert not a.done("old") and a.holder("new") is not None


def test_any_key_and_owner_text_is_accepted(stores: list[StateStore], clock: FakeClock) -> None:
    a = _leases(stores[0], clock)
    long_a = "hb:" + "ä" * 600 + ":a"
    long_b = "hb:" + "ä" * 600 + ":b"
    first = _claimed(a.claim(long_a, "gw-" + "x" * 500, 30))
    assert len(first.key) <= KEY_MAX and first.key == lease_key(long_a)
    assert len(first.owner) == 200
    _claimed(a.claim(long_b, "gw-a", 30))  # same prefix, different key: not held
    assert isinstance(a.claim(long_a, "gw-b", 30), Held)
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="positive number of seconds"):
            a.claim("k", "gw-a", bad)
    with pytest.raises(ValueError, match="non-empty"):
        a.claim("k", "", 30)


def test_postgres_judges_expiry_by_the_database_clock_not_the_gateways(pg_url: str) -> None:
    # Two gateways whose clocks disagree by minutes still agree on who holds a key.
    import uuid

    import psycopg

    schema = f"test_{uuid.uuid4().hex[:16]}"
    ahead, behind = FakeClock(), FakeClock()
    ahead.advance(minutes=5)
    behind.advance(minutes=-5)
    with (
        StateStore.open(pg_url, schema=schema) as s1,
        StateStore.open(pg_url, schema=schema) as s2,
    ):
        try:
            fast, slow = Leases(s1, ahead), Leases(s2, behind)
            assert fast.time_source == slow.time_source == "database"
            # 2 s: the second claim must come while the first holds, on a busy machine too
            claim = _claimed(slow.claim("hb:ws:t", "gw-slow", 2.0))
            assert isinstance(fast.claim("hb:ws:t", "gw-fast", 0.5), Held)
            deadline = time.monotonic() + 10
            taken: Claim | Held = Held("", "", claim.expires_at)
            while isinstance(taken, Held) and time.monotonic() < deadline:
                time.sleep(0.05)  # waiting for real time to pass on the database
                taken = fast.claim("hb:ws:t", "gw-fast", 30)
            taken = _claimed(taken)
            assert fast.now() >= claim.expires_at
            assert taken.fence == 2
        finally:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_on_sqlite_a_claim_of_a_dead_local_process_is_taken_over_at_once(
    tmp_path, clock: FakeClock
) -> None:
    """A gateway SIGKILLed mid-turn: after a restart its units are not busy for the
    turn timeout. A live process's claim, or another machine's, still holds."""
    import os
    import socket
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid is gone
    host = socket.gethostname()
    store = StateStore.open(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        leases = _leases(store, clock)
        dead = _claimed(leases.claim("hb:shared:checklist", f"{host}:{proc.pid}", 1800))
        alive = _claimed(leases.claim("hb:a:checklist", f"{host}:{os.getpid()}", 1800))
        remote = _claimed(leases.claim("hb:b:checklist", f"elsewhere-{host}:{proc.pid}", 1800))
        again = _claimed(leases.claim("hb:shared:checklist", f"{host}:1", 1800))
        assert again.fence == dead.fence + 1
        for claim in (alive, remote):
            held = leases.claim(claim.key, f"{host}:1", 1800)
            assert isinstance(held, Held) and held.holder == claim.owner
    finally:
        store.close()
