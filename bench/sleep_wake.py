"""A laptop that slept two hours: what the heartbeat does when the lid opens.

A real heartbeat loop (`HeartbeatService.run_forever`, the built-in agent loop, the
`openai` SDK against the fake OpenAI server on loopback) over one workspace with 20
scheduled entries. The clock is a `FakeClock` moved forward two hours in one step
while the loop waits, which is what a suspend looks like from inside the process:
the wall clock jumps, the event loop's monotonic clock does not. Nobody calls
`wake()`.

Printed for the gateway as it ships (the wait looks at the wall clock every 5 s)
and, as the baseline in the same run, for a loop that does not look (a plain
monotonic wait, as before issue 35): seconds from the jump to the first model call
(target under 15 s), model calls in the first minute after the jump, and whether
they are exactly the entries that fell due, once each (target: yes).

    uv run --dev python bench/sleep_wake.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from loguru import logger

from tests.support.harness import build_harness, with_tasks
from vikingbot.clock import FakeClock
from vikingbot.testing.fake_openai import FakeOpenAI

START = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
SLEEP_HOURS = 2
WINDOW_S = 60.0


def entries() -> tuple[list[str], set[str]]:
    """20 entries of the README's kinds; the titles that fall due in a 2 h sleep."""
    lines: list[str] = []
    due: set[str] = set()
    for i in range(6):
        lines.append(f"- every: 30m title: Inbox {i} task: Check inbox {i}.")
        due.add(f"Inbox {i}")
    for i in range(4):
        lines.append(f"- every: 1h title: Builds {i} task: Check build {i}.")
        due.add(f"Builds {i}")
    for i in range(3):
        lines.append(f"- every: 4h title: Backup {i} task: Check backup {i}.")  # not yet
    for i in range(3):
        lines.append(f"- daily: 13:{10 * i:02d} title: Brief {i} task: Brief {i}.")
        due.add(f"Brief {i}")
    for i in range(2):
        lines.append(f"- daily: 18:0{i} title: Evening {i} task: Evening {i}.")  # not yet
    for i in range(2):
        lines.append(f'- cron: "{15 * i} * * * *" title: Hourly {i} task: Hourly {i}.')
        due.add(f"Hourly {i}")
    return lines, due


def titles_asked(fake: FakeOpenAI, since: int) -> Counter[str]:
    found: Counter[str] = Counter()
    for request in fake.requests[since:]:
        text = request.last_user_text
        head = text.split("Task (", 1)
        if len(head) == 2:
            found[head[1].split(")", 1)[0]] += 1
    return found


async def one(root: Path, fake: FakeOpenAI, check_s: float) -> tuple[float | None, int, bool]:
    lines, due = entries()
    clock = FakeClock(START)
    async for h in build_harness(root, fake, clock=clock):
        h.user_session()
        h.write(with_tasks(*lines))
        hb = h.hb
        hb.nap_check_s = check_s
        stop = asyncio.Event()
        task = asyncio.create_task(hb.run_forever(stop))
        try:
            while len(hb.state.runs(limit=100)) < len(lines):  # the first cycle planned
                await asyncio.sleep(0.05)
            await hb.drain(10)
            await asyncio.sleep(1.0)  # the loop is waiting for the next cycle
            before = len(fake.requests)
            clock.advance(hours=SLEEP_HOURS)  # the lid opens
            t0 = time.monotonic()
            first: float | None = None
            while time.monotonic() - t0 < WINDOW_S:
                if first is None and len(fake.requests) > before:
                    first = time.monotonic() - t0
                if first is not None and titles_asked(fake, before).keys() >= due:
                    break
                await asyncio.sleep(0.05)
            in_window = len(fake.requests) - before
            await hb.drain(30)
            asked = titles_asked(fake, before)  # after the turns ended: nothing twice
            exact = set(asked) == due and all(n == 1 for n in asked.values())
            return first, in_window, exact
        finally:
            stop.set()
            hb.stop()
            await asyncio.wait_for(task, 10)
    raise AssertionError("unreachable")


async def main() -> None:
    logger.remove()
    _, due = entries()
    print(f"20 scheduled entries, {len(due)} fall due during a {SLEEP_HOURS} h sleep")
    rows = [("as shipped (looks every 5 s)", 5.0), ("baseline: plain monotonic wait", 3600.0)]
    for label, check_s in rows:
        with tempfile.TemporaryDirectory() as tmp, FakeOpenAI.start() as fake:
            first, calls, exact = await one(Path(tmp), fake, check_s)
        shown = f"{first:.1f} s" if first is not None else f"none within {WINDOW_S:.0f} s"
        print(
            f"{label:34} first model call after waking: {shown:>22} (target < 15 s); "
            f"model calls in the first minute: {calls} (expected {len(due)}); "
            f"exactly the due entries, once each (after the turns ended): "
            f"{'yes' if exact else 'no'}"
        )


if __name__ == "__main__":
    asyncio.run(main())
