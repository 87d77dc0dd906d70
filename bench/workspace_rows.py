"""What reading every workspace row each cycle costs a gateway on PostgreSQL (issue 14).

On PostgreSQL other gateways write workspace rows all the time, so a heartbeat
cycle reads the rows it plans from afresh. One home: 10,000 sessions in
per-session mode, each with its own workspace (so 10,000 workspace rows once the
first cycle wrote their skip streaks); every 100th HEARTBEAT.md holds a task,
so each cycle runs 100 units. Cycles run in this process on a clock that moves
one interval (600 s) per cycle; before each, a user writes to 100 random sessions.

Printed: the median cycle (from its start until its last unit committed), its
CPU seconds, the rows the cycle read (``heartbeat_workspaces`` SELECTs, counted
on the engine), and beside it what reading all 10,000 rows into ``WorkspaceState``
copies costs alone (median of 20).

    uv run --all-extras --dev python bench/workspace_rows.py [--sessions 10000] [--cycles 8]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _heartbeat_setup import BENCH_CONFIG, WritingAgent, build_home
from loguru import logger

from vikingbot.clock import FakeClock
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.gateway import compose
from vikingbot.heartbeat.state import HeartbeatState
from vikingbot.session.types import Message

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
SETTLE_S = 2.1  # folder mtimes settle (the index's watcher), as in 600 s


def _runtime(home: Path, clock: FakeClock, url: str) -> compose.Home:
    paths = Paths(
        home=home, config_file=home / "config.json", data_dir=home / "data", database_url=url
    )
    return compose.build_home(Config.model_validate(BENCH_CONFIG), paths, clock=clock, environ={})


class RowReads:
    """Counts rows the engine fetched from ``heartbeat_workspaces`` SELECTs."""

    def __init__(self, engine: Any) -> None:
        from sqlalchemy import event

        self.rows = 0
        self.selects = 0
        event.listen(engine, "after_cursor_execute", self._after)

    def _after(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        head = statement.lstrip()
        if head[:6].upper() == "SELECT" and "FROM heartbeat_workspaces" in head:
            self.selects += 1
            self.rows += max(cursor.rowcount, 0)


async def bench(root: Path, url: str, sessions: int, cycles: int) -> None:
    import psycopg

    from vikingbot.store.db import StateStore

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    StateStore.open(url, schema=schema).close()
    db_url = f"{url}?options=-csearch_path%3D{schema}"
    try:
        keys, _ = build_home(root, sessions, task_every=100, task="- Check the build", now=NOW)
        clock = FakeClock(NOW)
        rt = _runtime(root, clock, db_url)
        agent = WritingAgent(rt)
        svc = compose.heartbeat(rt, agent=agent)  # type: ignore[arg-type]
        reads = RowReads(rt.store.engine)
        rnd = random.Random(1)
        await svc.run_cycle("scheduled")  # the first cycle reads every file: not counted
        times, cpus, rows, selects, ran = [], [], [], [], []
        for _ in range(cycles):
            clock.advance(seconds=600)
            for key in rnd.sample(keys, 100):
                rt.sessions.append(key, Message("user", "any news?", clock.now()))
            time.sleep(SETTLE_S)
            before, r0, s0 = agent.calls, reads.rows, reads.selects
            t0, c0 = time.perf_counter(), time.process_time()
            await svc.run_cycle("scheduled")
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            rows.append(reads.rows - r0)
            selects.append(reads.selects - s0)
            ran.append(agent.calls - before)
        total = len(HeartbeatState(rt.store).all_workspaces())
        full = []
        for _ in range(20):
            t0 = time.perf_counter()
            HeartbeatState(rt.store).all_workspaces()  # a new one reads every row
            full.append(time.perf_counter() - t0)
        svc.stop()
        await svc.drain(10)
        await rt.aclose()
        print(
            f"workspace_rows: {sessions} sessions, {total} workspace rows, "
            f"{statistics.median(ran):.0f} units run per cycle, PostgreSQL\n"
            f"  cycle: median {statistics.median(times) * 1000:.0f} ms wall, "
            f"{statistics.median(cpus) * 1000:.0f} ms CPU\n"
            f"  workspace rows read per cycle: median {statistics.median(rows):.0f} "
            f"in {statistics.median(selects):.0f} SELECTs\n"
            f"  reading all {total} rows alone: median {statistics.median(full) * 1000:.1f} ms "
            f"(min {min(full) * 1000:.1f} ms)"
        )
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--cycles", type=int, default=8)
    ap.add_argument("--pg-url", default=PG_URL)
    args = ap.parse_args()
    logger.remove()
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(bench(Path(d), args.pg_url, args.sessions, args.cycles))


if __name__ == "__main__":
    main()
