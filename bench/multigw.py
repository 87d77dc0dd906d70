"""Several gateways on one PostgreSQL database (issue 14): throughput, failover, exactly once.

    uv run --all-extras python bench/multigw.py [--quick] [--pg-url URL]

Prints:
1. units claimed and finished per second with 1, 2 and 4 gateway processes, 1,000
   workspaces each with one due unit, the fake model answering at once (the
   1-gateway run is the baseline). Each unit: lease claim, model call over HTTP,
   result + outbox row under the lease's fence, send to the fake Telegram, mark sent
   (``vikingbot.testing.unit_worker``);
2. failover with default settings: from SIGKILL of the gateway receiving Telegram
   (long polling) to another gateway holding the channel and polling (target < 30 s);
3. ten runs of 4 gateways x 1,000 units with one gateway SIGKILLed in the middle:
   duplicates and lost units (targets 0 and 0), and messages Telegram got twice.

``--quick`` uses 200 units and 3 kill runs. Needs PostgreSQL (default
postgresql://postgres@127.0.0.1:5432/test); every run uses a fresh schema.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from vikingbot.channels.leadership import CHECK_S, TTL_S
from vikingbot.store.db import StateStore
from vikingbot.testing.fake_telegram import FakeTelegram
from vikingbot.testing.unit_fleet import run_fleet

ROOT = Path(__file__).resolve().parents[1]


def throughput(url: str, units: int) -> None:
    print(f"1. throughput: {units} workspaces, one due unit each, max_concurrency 4 per gateway")
    for gateways in (1, 2, 4):
        r = run_fleet(url, gateways=gateways, units=units, timeout_s=900)
        print(
            f"   {gateways} gateway(s): {r.per_second:7.1f} units/s  ({r.seconds:5.1f} s; "
            f"duplicates {r.recorded_duplicates}, lost {r.lost}, "
            f"delivered twice {r.delivered_duplicates}, undelivered {r.undelivered}; "
            f"finished per gateway {list(r.finished_by)})",
            flush=True,
        )


def _node(name: str, url: str, schema: str, api: str, token: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vikingbot.testing.channel_node",
            name,
            url,
            schema,
            api,
            token,
            str(TTL_S),
            str(CHECK_S),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )


def _state(proc: subprocess.Popen[str]) -> tuple[float, str]:
    assert proc.stdout is not None
    at, state = proc.stdout.readline().split()
    return float(at), state


def failover(url: str) -> None:
    import psycopg

    print(f"2. channel failover, defaults (lease {TTL_S:.0f} s, checked every {CHECK_S:.0f} s)")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    StateStore.open(url, schema=schema).close()
    fake = FakeTelegram()
    procs: list[subprocess.Popen[str]] = []
    try:
        with fake.serve() as api:
            a = _node("gw-a", url, schema, api, fake.token)
            procs.append(a)
            assert _state(a)[1] == "held"
            b = _node("gw-b", url, schema, api, fake.token)
            procs.append(b)
            assert _state(b)[1] == "standby"
            time.sleep(1.0)
            a.send_signal(signal.SIGKILL)
            killed = time.time()
            polls = fake.polls
            taken_at, state = _state(b)
            assert state == "held"
            while fake.polls == polls:
                time.sleep(0.01)
            polled = time.time()
            print(
                f"   SIGKILL of the holder -> other gateway holds the channel: "
                f"{taken_at - killed:5.1f} s; -> it polls Telegram: {polled - killed:5.1f} s "
                f"(target < 30 s); concurrent pollers seen: {fake.overlaps}",
                flush=True,
            )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def kill_runs(url: str, units: int, runs: int) -> None:
    print(f"3. {runs} runs: 4 gateways, {units} units, one gateway SIGKILLed in the middle")
    totals = [0, 0, 0, 0]
    for n in range(runs):
        r = run_fleet(url, gateways=4, units=units, kill_after=units // 3, timeout_s=900)
        assert r.killed
        row = (r.recorded_duplicates, r.lost, r.delivered_duplicates, r.undelivered)
        totals = [t + v for t, v in zip(totals, row, strict=True)]
        print(
            f"   run {n + 1:2d}: {r.seconds:5.1f} s, duplicates {row[0]}, lost {row[1]}, "
            f"delivered twice {row[2]}, undelivered {row[3]}, model calls {r.model_calls}",
            flush=True,
        )
    print(
        f"   total: duplicates {totals[0]} (target 0), lost {totals[1]} (target 0), "
        f"delivered twice {totals[2]}, undelivered {totals[3]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    units, runs = (200, 3) if args.quick else (1000, 10)
    throughput(args.pg_url, units)
    failover(args.pg_url)
    kill_runs(args.pg_url, units, runs)


if __name__ == "__main__":
    main()
