"""A day with a 3-hour model outage in its middle (issue 11): is it an outage, or failures?

144 ten-minute ticks on a FakeClock through the real agent loop (provider
``openai`` pointed at a ``FakeOpenAI`` on loopback). From 10:00 to 13:00 the
fake server answers every request with HTTP 500. Four workspaces (per-session):

- a checklist task (``- Check the inbox``), a turn every tick;
- a scheduled ``every: 30m`` entry;
- a scheduled ``daily: 11:00`` entry, whose slot falls inside the outage;
- a scheduled ``every: 1h`` entry in per-entry retry danger: it would be parked
  after 3 failed runs if the outage counted as failures.

The same day is run twice in this process, side by side: without the outage
(baseline) and with it. Printed: model calls, owner notices (target: exactly 2,
"down" and "back"), parked entries (target 0), the daily slot's run (once, after
the outage), and the outcomes by kind. The provider's own SDK retries are off
(``max_retries: 0``), so every try is one request and the day takes seconds.

    uv run --dev python bench/outage_day.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _heartbeat_setup import make_runtime, with_tasks, write_session
from loguru import logger

from vikingbot.clock import FakeClock
from vikingbot.delivery.service import Outgoing
from vikingbot.delivery.types import OutboundMessage
from vikingbot.gateway import compose
from vikingbot.session.types import SessionKey

DAY_START = datetime(2026, 3, 10, 0, 0, tzinfo=UTC)
TICK_S = 600
TICKS = 144
OUTAGE = (datetime(2026, 3, 10, 10, 0, tzinfo=UTC), datetime(2026, 3, 10, 13, 0, tzinfo=UTC))
ENTRIES = {
    "inbox": "- Check the inbox",
    "builds": "- every: 30m title: Builds task: Check the CI for failed builds",
    "digest": "- daily: 11:00 title: Digest task: Summarise the morning's news",
    "backup": "- every: 1h title: Backup task: Check that last night's backup finished",
}


async def run_day(home: Path, *, outage: bool) -> dict[str, Any]:
    from vikingbot.testing.fake_openai import FakeOpenAI, error, reply

    clock = FakeClock(DAY_START - timedelta(minutes=20))
    with FakeOpenAI.start() as fake:
        cfg = {
            "bot": {
                "owner": "telegram:42",
                "sandbox": {"mode": "per-session"},
                "agents": {"provider": "openai", "model": "fake"},
                "providers": {
                    "openai": {"api_base": fake.base_url, "api_key": "k", "max_retries": 0}
                },
                "channels": {"telegram": {"enabled": True, "token": "t", "allow_from": ["42"]}},
                "heartbeat": {"timezone": "UTC", "interval_seconds": TICK_S},
            }
        }
        rt = make_runtime(home, clock, cfg)
        for n, (name, line) in enumerate(ENTRIES.items()):
            key = SessionKey("telegram", "default", f"{name}{n}")
            write_session(rt.paths.sessions_dir, key, DAY_START - timedelta(minutes=30))
            ws = rt.workspaces.path_for(key)
            ws.mkdir(parents=True, exist_ok=True)
            (ws / "HEARTBEAT.md").write_text(with_tasks(line))
        sent: list[OutboundMessage] = []

        async def record(item: Outgoing) -> bool:
            sent.append(item.message)
            return True

        rt.delivery.connect(record)
        svc = compose.heartbeat(rt)
        await svc.run_cycle("scheduled")  # every entry first seen before the day
        fake.default = reply("HEARTBEAT_OK")
        before_day = len(fake.requests)
        outcomes: Counter[str] = Counter()
        during = 0
        digest_runs: list[str] = []
        t0 = time.perf_counter()
        for _ in range(TICKS):
            clock.advance(seconds=TICK_S)
            down = outage and OUTAGE[0] <= clock.now() < OUTAGE[1]
            fake.default = error(500, "the server had an error") if down else reply("HEARTBEAT_OK")
            n = len(fake.requests)
            report = await svc.run_cycle("scheduled")
            if down:
                during += len(fake.requests) - n
            for r in report.rows:
                label = r.outcome if r.decision == "run" else f"skip {r.reason}"
                outcomes[label or "?"] += 1
                if r.entry == "Digest" and r.decision == "run":
                    digest_runs.append(f"{clock.now():%H:%M} {r.outcome}")
        wall = time.perf_counter() - t0
        parked = svc.parked()
        notices = [m.text for m in sent if (m.metadata or {}).get("source") == "heartbeat:notice"]
        calls = len(fake.requests) - before_day
        await rt.aclose()
    return {
        "calls": calls,
        "during": during,
        "notices": notices,
        "parked": parked,
        "outcomes": outcomes,
        "digest": digest_runs,
        "wall": wall,
    }


def main() -> None:
    logger.remove()
    results = {}
    for outage in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            results[outage] = asyncio.run(run_day(Path(tmp), outage=outage))
    base, day = results[False], results[True]
    print(f"simulated day: {TICKS} ticks of 10 min, 4 workspaces, real agent loop, fake OpenAI")
    print(f"outage: HTTP 500 for every request from {OUTAGE[0]:%H:%M} to {OUTAGE[1]:%H:%M} UTC")
    print(f"model calls without the outage (baseline): {base['calls']}")
    print(
        f"model calls with the outage: {day['calls']} "
        f"(during the 3 hours: {day['during']} tries, backoff between them)"
    )
    print(f"owner notices: {len(day['notices'])} (target 2; baseline {len(base['notices'])})")
    for text in day["notices"]:
        print(f"  - {text[:110]}")
    print(f"parked entries: {len(day['parked'])} (target 0)")
    print(
        f"daily 11:00 slot ran: {', '.join(day['digest']) or 'never'} (baseline {base['digest']})"
    )
    print("outcomes over the outage day:")
    for label, n in sorted(day["outcomes"].items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:5d}  {label}")
    print(f"wall time: baseline {base['wall']:.1f} s, outage day {day['wall']:.1f} s")


if __name__ == "__main__":
    main()
