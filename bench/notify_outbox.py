"""100 heartbeat results to one `notify:` target whose endpoint fails every third request.

The gateway's outbound path in one process: a real `DeliveryService` (as the gateway
wires it) hands each result to the `ChannelManager` (outbox, retries with backoff),
which pushes through the real Apprise library (`ntfy://`) to a loopback ntfy-style
endpoint (`tests/support/push_endpoint.py`). Each result has its own dedupe key, as
heartbeat runs do, four at a time (`bot.heartbeat.max_concurrency`'s default). Printed: results received by the endpoint (target 100), duplicates
(target 0), requests made, results failed, wall time; beside a baseline run against
an endpoint that never fails, and the flaky endpoint with `sendRetries` 5.
`spacingS: 0` (a self-hosted ntfy: no pause between
pushes; Apprise's default pace is 5.5 s per push).

    uv run --dev python bench/notify_outbox.py [--results 100] [--fail-every 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.outbound import delivery_for
from tests.support.push_endpoint import PushEndpoint
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.config.schema import Config
from vikingbot.delivery.types import DeliveryReport
from vikingbot.store.db import StateStore


async def run(
    push: PushEndpoint, results: int, fail_every: int, parallel: int, db: Path, retries: int = 3
) -> dict[str, float]:
    with push.cond:
        push.received.clear()
        push.requests = 0
        push.fail_every = fail_every
    config = Config.model_validate(
        {
            "bot": {
                "owner": "notify:phone",
                "channels": {
                    "cli": {"enabled": False},
                    "sendRetries": retries,
                    "notify": {
                        "enabled": True,
                        "targets": {"phone": push.url("phone")},
                        "spacingS": 0,
                    },
                },
            }
        }
    )
    with StateStore.open(f"sqlite:///{db}") as store:
        manager = ChannelManager(config, bus=MessageBus(), store=store, retry_delay_s=0.05)
        await manager.start()
        delivery = delivery_for(manager)
        slots = asyncio.Semaphore(parallel)

        async def one(n: int) -> DeliveryReport:
            async with slots:
                return await delivery.deliver(
                    f"Heartbeat result {n}: build {n} is green",
                    "notify:phone",
                    source="heartbeat",
                    dedupe_key=f"hb-run-{n}:digest:1",
                )

        start = time.perf_counter()
        reports = await asyncio.gather(*(one(n) for n in range(results)))
        wall = time.perf_counter() - start
        await manager.stop()
    counts = Counter(p.message for p in push.received)
    return {
        "received": len(counts),
        "duplicates": sum(c - 1 for c in counts.values()),
        "requests": push.requests,
        "failed": sum(1 for r in reports if r.status != "delivered"),
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=int, default=100)
    parser.add_argument("--fail-every", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=4, help="as bot.heartbeat.max_concurrency")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, PushEndpoint.serving() as push:
        base = asyncio.run(run(push, args.results, 0, args.parallel, Path(tmp) / "base.db"))
        flaky = asyncio.run(
            run(push, args.results, args.fail_every, args.parallel, Path(tmp) / "flaky.db")
        )
        flaky5 = asyncio.run(
            run(push, args.results, args.fail_every, args.parallel, Path(tmp) / "f5.db", 5)
        )
    print(
        f"{args.results} heartbeat results to notify:phone (ntfy:// on loopback, spacingS 0, "
        f"{args.parallel} at a time, sendRetries 3 unless said)"
    )
    print(
        f"{'endpoint':<32} {'received':>8} {'duplicates':>10} {'requests':>8} {'failed':>6} {'wall s':>7}"
    )
    for name, row in (
        ("baseline: never fails", base),
        (f"fails every {args.fail_every}rd request", flaky),
        (f"fails every {args.fail_every}rd, sendRetries 5", flaky5),
    ):
        print(
            f"{name:<32} {row['received']:>8.0f} {row['duplicates']:>10.0f} "
            f"{row['requests']:>8.0f} {row['failed']:>6.0f} {row['wall_s']:>7.2f}"
        )


if __name__ == "__main__":
    main()
