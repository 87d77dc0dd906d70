"""Several gateways on one PostgreSQL database (issue 14), with real `vikingbot gateway`s.

    uv run --all-extras --dev python bench/multigw.py [--quick] [--units N] [--runs N] [--pg-url URL]

Every figure comes from real gateway processes on one home and one fresh PostgreSQL
schema (``tests.support.gateway_fleet``): per-session workspaces, each with one
due per-task entry, the scripted fake model answering at once, results delivered
to the owner on a fake Telegram. Prints:

1. units claimed and finished per second with 1, 2 and 4 gateways (the 1-gateway
   run is the baseline beside them), timed by the database from the first unit
   claimed to the last finished, so the gateways' start-up is not in the figure;
   and how the units spread over the gateways;
2. channel failover with default settings (``bot.gateway.lease_s`` 15 s): two
   gateways, SIGKILL of the one polling Telegram, time until the other polls
   (target < 30 s), and whether two ever polled at once;
3. kill runs: 4 gateways, one SIGKILLed while it holds heartbeat claims (mid-cycle)
   after a third of the units were delivered; per run and in total: units recorded
   twice (target 0), units lost (target 0), messages Telegram got twice and how many
   of them were outbox rows taken over while possibly sent (their send was on the
   wire at the kill; target: all of them, "other" 0) beside the survivors'
   ``vikingbot_outbox_resent_after_crash_total``, turns run again (the killed
   gateway's undelivered turns), outbox rows left pending.

Defaults: 1,000 workspaces and 10 kill runs (the issue's figures; this takes a
long time on a small machine). ``--quick``: 200 workspaces, 3 kill runs.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_fleet import run_gateways
from tests.support.gateway_proc import GatewayProcess

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def throughput(url: str, units: int) -> None:
    print(f"1. throughput: {units} workspaces, one due task each, max_concurrency 4 per gateway")
    for gateways in (1, 2, 4):
        with tempfile.TemporaryDirectory() as work:
            r = run_gateways(url, Path(work), gateways=gateways, units=units, timeout_s=1800)
        print(
            f"   {gateways} gateway(s): {r.work_per_second:6.1f} units/s claimed and finished "
            f"({r.work_s:5.1f} s from first claim to last finish; start-up "
            f"{r.started_in_s:4.1f} s not counted); per gateway {list(r.by_gateway)}; "
            f"recorded twice {r.duplicates}, lost {r.lost}",
            flush=True,
        )


def failover(url: str) -> None:
    import psycopg

    from tests.support.gateway_fleet import OWNER_ID
    from vikingbot.store.db import StateStore
    from vikingbot.testing.fake_openai import FakeOpenAI

    print("2. channel failover, default settings (bot.gateway.lease_s 15 s, checked every 5 s)")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    StateStore.open(url, schema=schema).close()
    fake = FakeTelegram()
    gws: list[GatewayProcess] = []
    try:
        with FakeOpenAI.start() as model, fake.serve() as api, tempfile.TemporaryDirectory() as d:
            home = Path(d)
            config = {
                "bot": {
                    "owner": f"telegram:{OWNER_ID}",
                    "agents": {"provider": "openai", "model": "fake-model"},
                    "providers": {"openai": {"api_base": model.base_url, "api_key": "sk-x"}},
                    "channels": {
                        "cli": {"enabled": False},
                        "telegram": {"enabled": True, "token": fake.token, "api_base": api},
                    },
                },
                "storage": {"database_url": url + f"?options=-csearch_path%3D{schema}"},
            }
            (home / "config.json").write_text(json.dumps(config))
            try:
                _failover(home, gws, fake)
            finally:
                for gw in gws:
                    gw.kill()
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _failover(home: Path, gws: list[GatewayProcess], fake: FakeTelegram) -> None:
    for n in range(2):
        gws.append(GatewayProcess(home, log=home / f"gw-{n}.out").start())
    holder = _holder(gws)
    other = next(g for g in gws if g is not holder)
    polls = fake.polls
    while fake.polls < polls + 2:  # the holder is polling
        time.sleep(0.05)
    assert holder.proc is not None
    holder.proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    holder.proc.wait()
    polls = fake.polls
    while fake.polls == polls and time.monotonic() - killed < 120:
        time.sleep(0.01)
    took = time.monotonic() - killed
    print(
        f"   SIGKILL of the gateway polling Telegram -> the other polls: {took:5.1f} s "
        f"(target < 30 s); two pollers at once: {fake.overlaps} times",
        flush=True,
    )
    other.stop()


def _holder(gws: list[GatewayProcess]) -> GatewayProcess:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for gw in gws:
            health = gw.get("/health")
            me = health.get("gateway_id")
            if any(p["id"] == me and p["channels"] for p in health.get("gateways", [])):
                return gw
        time.sleep(0.2)
    raise RuntimeError("no gateway took the Telegram channel")


def kill_runs(url: str, units: int, runs: int) -> None:
    print(f"3. {runs} kill runs: 4 gateways, {units} workspaces, one gateway SIGKILLed mid-cycle")
    totals = [0] * 8
    for n in range(runs):
        with tempfile.TemporaryDirectory() as work:
            r = run_gateways(url, Path(work), gateways=4, units=units, kills=1, timeout_s=1800)
        row = (
            r.duplicates,
            r.lost,
            r.delivered_twice,
            r.twice_in_flight,
            r.twice_other,
            r.resent_metric,
            r.turns_repeated,
            r.pending_outbox,
        )
        totals = [t + v for t, v in zip(totals, row, strict=True)]
        print(
            f"   run {n + 1:2d}: killed {r.killed}, recorded twice {row[0]}, lost {row[1]}, "
            f"Telegram got twice {row[2]} (possibly-sent rows {row[3]}, other {row[4]}; "
            f"resent-after-crash metric {row[5]}), turns run again {row[6]}, "
            f"outbox pending {row[7]} ({r.seconds:5.1f} s)",
            flush=True,
        )
    print(
        f"   total: recorded twice {totals[0]} (target 0), lost {totals[1]} (target 0), "
        f"Telegram got twice {totals[2]} (possibly-sent rows {totals[3]}, other {totals[4]} "
        f"(target 0); resent-after-crash metric {totals[5]}), turns run again {totals[6]}, "
        f"outbox pending {totals[7]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 workspaces, 3 kill runs")
    parser.add_argument("--units", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--parts", default="1,2,3", help="which figures, e.g. 2 or 1,3")
    parser.add_argument("--pg-url", default=PG_URL)
    args = parser.parse_args()
    units = args.units or (200 if args.quick else 1000)
    runs = args.runs or (3 if args.quick else 10)
    parts = set(args.parts.split(","))
    if "1" in parts:
        throughput(args.pg_url, units)
    if "2" in parts:
        failover(args.pg_url)
    if "3" in parts:
        kill_runs(args.pg_url, units, runs)


if __name__ == "__main__":
    main()
