"""Run N unit workers (``vikingbot.testing.unit_worker``) on one PostgreSQL schema and count.

Shared by ``tests/multigw`` (small numbers) and ``bench/multigw.py`` (the issue's
numbers): start the fake model and the fake Telegram, start the workers, let them
go at once, optionally SIGKILL one in the middle, wait for the rest, then count
per unit how many results were recorded and how many messages Telegram got.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class FleetResult:
    gateways: int
    units: int
    seconds: float  # from "go" to the last worker finishing
    recorded_duplicates: int  # result rows beyond one per unit
    lost: int  # units with no result row
    delivered_duplicates: int  # Telegram messages beyond one per unit
    undelivered: int  # units whose message never reached Telegram
    model_calls: int  # more than units when a killed worker's turns ran again
    killed: bool
    finished_by: tuple[int, ...] = ()  # units each gateway finished (load spread)

    @property
    def per_second(self) -> float:
        return self.units / self.seconds if self.seconds > 0 else 0.0


def _reader(name: str, stream: IO[str], lines: queue.Queue[tuple[str, str]]) -> None:
    for line in stream:
        lines.put((name, line.strip()))


def run_fleet(
    pg_url: str,
    *,
    gateways: int,
    units: int,
    concurrency: int = 4,
    ttl_s: float = 2.0,
    kill_after: int | None = None,
    timeout_s: float = 600.0,
) -> FleetResult:
    """Run the fleet on a fresh schema of ``pg_url``; the schema is dropped after."""
    import psycopg

    from vikingbot.store.db import StateStore
    from vikingbot.store.tables import heartbeat_runs
    from vikingbot.testing.fake_openai import FakeOpenAI
    from vikingbot.testing.fake_telegram import FakeTelegram

    schema = f"fleet_{uuid.uuid4().hex[:12]}"
    store = StateStore.open(pg_url, schema=schema)
    telegram = FakeTelegram()
    procs: list[subprocess.Popen[str]] = []
    try:
        with FakeOpenAI.start() as model, telegram.serve() as tg_api:
            lines: queue.Queue[tuple[str, str]] = queue.Queue()
            for n in range(gateways):
                name = f"gw-{n}"
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "vikingbot.testing.unit_worker",
                        name,
                        pg_url,
                        schema,
                        model.base_url,
                        tg_api,
                        telegram.token,
                        str(units),
                        str(concurrency),
                        str(ttl_s),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                    cwd=ROOT,
                )
                procs.append(proc)
                assert proc.stdout is not None
                threading.Thread(
                    target=_reader, args=(name, proc.stdout, lines), daemon=True
                ).start()
            deadline = time.monotonic() + timeout_s
            ready = 0
            while ready < gateways:
                _, line = lines.get(timeout=max(1.0, deadline - time.monotonic()))
                ready += line == "ready"
            t0 = time.monotonic()
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            killed = False
            finished: set[str] = set()
            claimed: Counter[str] = Counter()
            done_by: dict[str, int] = {}
            alive = gateways
            while len(finished) < alive:
                name, line = lines.get(timeout=max(1.0, deadline - time.monotonic()))
                parts = line.split()
                if len(parts) >= 3 and parts[1] == "claimed":
                    claimed[name] = int(parts[2])
                    due = kill_after is not None and sum(claimed.values()) >= kill_after
                    if due and not killed and "gw-0" not in finished:
                        procs[0].send_signal(signal.SIGKILL)
                        killed, alive = True, alive - 1
                elif len(parts) >= 4 and parts[1] == "finished":
                    finished.add(name)
                    done_by[name] = int(parts[3])
            seconds = time.monotonic() - t0
        with store.engine.connect() as conn:
            rows = conn.execute(heartbeat_runs.select()).all()
        recorded = Counter(r.workspace for r in rows)
        delivered = Counter(m["text"].split(":")[1] for m in telegram.sent)
        expected = {f"ws-{n:04d}" for n in range(units)}
        return FleetResult(
            gateways=gateways,
            units=units,
            seconds=seconds,
            recorded_duplicates=sum(c - 1 for c in recorded.values() if c > 1),
            lost=len(expected - set(recorded)),
            delivered_duplicates=sum(c - 1 for c in delivered.values() if c > 1),
            undelivered=len(expected - set(delivered)),
            model_calls=len(model.requests),
            killed=killed,
            finished_by=tuple(done_by.get(f"gw-{n}", 0) for n in range(gateways)),
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        store.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
