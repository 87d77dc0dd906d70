"""The housekeeping schedule: what is due when, and run_forever doing it off the loop."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

from vikingbot.housekeeping.search import search
from vikingbot.store.tables import history_cursor

if TYPE_CHECKING:
    from conftest import Housekeeping


async def test_due_follows_the_configured_intervals(hk: Housekeeping) -> None:
    svc = hk.service
    assert svc.due(hk.now) == ["index", "consolidate", "prune"]  # all run at start
    await svc.index_now()
    await svc.consolidate_now()
    await svc.prune_now()
    assert svc.due(hk.now) == []
    hk.clock.advance(seconds=899)
    assert svc.due(hk.clock.now()) == []
    hk.clock.advance(seconds=1)
    assert svc.due(hk.clock.now()) == ["index", "consolidate"]
    hk.clock.set(hk.now + timedelta(days=1))
    assert "prune" in svc.due(hk.clock.now())


async def test_run_forever_indexes_and_stops(hk: Housekeeping) -> None:
    hk.sessions.append("telegram:default:1", hk.msg("user", "the harbour festival is in June", 1))
    stop = asyncio.Event()
    task = asyncio.create_task(hk.service.run_forever(stop))
    for _ in range(500):  # the first pass runs at once; wait for it, not for a schedule
        if hk.service.metrics["prune_runs_total"]:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert hk.service.metrics["index_runs_total"] == 1
    assert hk.service.metrics["index_docs_added_total"] == 1
    assert len(search(hk.store, "harbour festival")) == 1


async def test_an_index_failure_is_counted_and_the_next_run_works(hk: Housekeeping) -> None:
    hk.sessions.append("telegram:default:1", hk.msg("user", "before the outage", 1))
    with hk.store.engine.begin() as conn:
        history_cursor.drop(conn)  # the database breaks under the indexer
    assert await hk.service.index_now() is None  # logged, counted, not raised
    assert hk.service.metrics["index_failures_total"] == 1
    with hk.store.engine.begin() as conn:
        history_cursor.create(conn)
    second = await hk.service.index_now()
    assert second is not None and second.docs_added == 1
    assert len(search(hk.store, "outage")) == 1
