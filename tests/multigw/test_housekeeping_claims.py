"""Housekeeping across gateways: each job runs on one gateway per interval."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.databases import SharedDb
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.housekeeping.service import HousekeepingService
from vikingbot.session.store import SessionStore
from vikingbot.workspace.manager import WorkspaceManager

JOBS = ("index", "consolidate", "prune")


async def test_each_job_runs_on_one_gateway_per_interval(
    shared_db: SharedDb, tmp_path: Path
) -> None:
    clock = FakeClock()
    config = Config.model_validate({"bot": {"memory": {"historyMaxDays": 30}}})
    stores = [shared_db.open() for _ in range(3)]
    services = [
        HousekeepingService(
            config,
            store=store,
            sessions=SessionStore(tmp_path / "sessions", clock),  # one shared home
            workspaces=WorkspaceManager(tmp_path / "workspace"),
            clock=clock,
            owner=f"gw-{i}",
        )
        for i, store in enumerate(stores)
    ]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(s.run_forever(stop)) for s in services]
    try:
        for _ in range(2000):  # until every gateway has passed its first round
            if all(set(s._last) == set(JOBS) for s in services):
                break
            await asyncio.sleep(0.01)
        runs = {job: sum(s.metrics[f"{job}_runs_total"] for s in services) for job in JOBS}
        assert runs == {"index": 1, "consolidate": 1, "prune": 1}
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        for store in stores:
            store.close()
