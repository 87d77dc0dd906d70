"""Two real gateway processes on one home and one PostgreSQL schema.

PostgreSQL lets them share the home (no single-gateway lock), both list each
other in /health, exactly one of them polls Telegram, and when it stops the
other takes the channel over.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.databases import SharedDb
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import both_started, write_shared_home


@pytest.fixture
def pg_home(pg_schema: SharedDb, tmp_path: Path) -> Iterator[tuple[Path, FakeTelegram]]:
    fake = FakeTelegram(max_poll_s=0.3)
    with fake.serve() as api:
        home = write_shared_home(
            tmp_path / "home",
            pg_schema.config_url,
            owner="telegram:42",
            channels={"telegram": {"enabled": True, "token": fake.token, "api_base": api}},
            # a 3 s lease: the standby looks for a free channel every second,
            # not every 5 s (15 s, the default, / 3): the test waits for it twice
            gateway={"shutdown_grace_s": 2, "lease_s": 3},
        )
        yield home, fake


def _until(check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)
    return found


def test_two_gateways_share_a_home_and_one_polls(
    pg_home: tuple[Path, FakeTelegram],
) -> None:
    home, fake = pg_home
    with both_started(home) as (a, b):

        def both_listed() -> list[dict[str, Any]] | None:
            """Both running, and the channel's holder has said so (at its next beat:
            started at once, both may be listed before either has claimed it)."""
            peers = a.get("/health")["gateways"]
            running = [p for p in peers if p["state"] == "running"]
            return running if len(running) == 2 and any(p["channels"] for p in running) else None

        peers = _until(both_listed, timeout=30)
        holders = [p["id"] for p in peers if p["channels"] == ["telegram:default"]]
        assert len(holders) == 1
        ids = {a.get("/health")["gateway_id"]: a, b.get("/health")["gateway_id"]: b}
        holder, other = ids[holders[0]], next(g for i, g in ids.items() if i != holders[0])
        polls = fake.polls
        _until(lambda: fake.polls >= polls + 3, timeout=30)

        holder.stop()  # a clean stop releases the channel: the other polls within seconds
        _until(lambda: any(p["channels"] for p in other.get("/health")["gateways"]), timeout=30)
        polls = fake.polls
        _until(lambda: fake.polls >= polls + 3, timeout=30)
        assert fake.overlaps == 0
