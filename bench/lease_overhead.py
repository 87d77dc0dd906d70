"""What the per-unit claims cost a heartbeat cycle (issue 9, item 4).

Two homes built alike: 10,000 sessions in per-session mode, each with its own
workspace; every 100th HEARTBEAT.md holds a task, so each cycle runs 100 units
(checklist turns) and plans 9,900 quiet workspaces. One heartbeat claims every
unit in the state store before its turn and releases it after (the production
wiring: ``Leases`` on the home's SQLite database); the other has no claims
(``compose.heartbeat(claims=False)``), everything else the same.

Cycles alternate between the two in one process (the order flips every round,
so a machine getting busier does not favour either), on clocks that move one
real interval (600 s) per cycle so every task is due again. Before each round
the previous turns wrote their sessions (the agent appends to its session, as
the built-in loop does) and a user wrote to 100 random sessions. A cycle is
timed from its start until its last unit has committed (the turns answer at
once, so the figure is the heartbeat's own work, where the claims' share is
largest). Printed: the median cycle with and without claims and the added
share (target under 5%), the median of each round's paired difference, the
fastest cycle of each side against the other (the least disturbed on a busy
machine), CPU seconds per cycle (less swayed by load than wall time), and the
claim + release round trip per unit on the same database.

    uv run --dev python bench/lease_overhead.py [--sessions 10000] [--every 100] [--rounds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _heartbeat_setup import BENCH_CONFIG, WritingAgent, build_home, make_runtime
from loguru import logger

from vikingbot.clock import FakeClock
from vikingbot.gateway import compose
from vikingbot.session.types import Message, SessionKey

TARGET = 0.05
SETTLE_S = 0.2


class Side:
    def __init__(self, home: Path, keys: list[SessionKey], *, claims: bool, seed: int) -> None:
        self.clock = FakeClock(NOW)
        self.rt = make_runtime(home, self.clock, BENCH_CONFIG)
        self.agent = WritingAgent(self.rt)
        self.svc = compose.heartbeat(self.rt, agent=self.agent, claims=claims)  # type: ignore[arg-type]
        self.claims = claims
        self.keys = keys
        self.rnd = random.Random(seed)
        self.times: list[float] = []
        self.cpus: list[float] = []  # this process's CPU seconds (all threads) per cycle
        self.runs: list[int] = []

    def user_writes(self, n: int) -> None:
        for key in self.rnd.sample(self.keys, n):
            self.rt.sessions.append(key, Message("user", "any news?", self.clock.now()))

    async def cycle(self, *, timed: bool) -> None:
        self.clock.advance(seconds=600)
        before = self.agent.calls
        t0, c0 = time.perf_counter(), time.process_time()
        report = await self.svc.run_cycle("scheduled")
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        ran = self.agent.calls - before
        busy = [r for r in report.rows if r.outcome == "busy"]
        if busy:
            raise SystemExit(f"unexpected busy units: {busy[:3]}")
        if timed:
            self.times.append(took)
            self.cpus.append(cpu)
            self.runs.append(ran)

    async def close(self) -> None:
        self.svc.scanner.close()
        await self.rt.aclose()


NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def claim_round_trip(side: Side, n: int = 200) -> float:
    """Median seconds of one claim + release on the home's database (what a unit adds)."""
    leases = side.svc.leases
    assert leases is not None
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        got = leases.claim(f"bench:{i}", "bench", 60.0)
        leases.release(got)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def bench(root: Path, sessions: int, every: int, rounds: int) -> None:
    task = "- Check the build"
    keys, _ = build_home(root / "with", sessions, task_every=every, task=task, now=NOW)
    build_home(root / "without", sessions, task_every=every, task=task, now=NOW)
    with_claims = Side(root / "with", keys, claims=True, seed=1)
    without = Side(root / "without", keys, claims=False, seed=1)
    sides = [with_claims, without]
    for side in sides:  # the first cycle reads every file: not counted
        await side.cycle(timed=False)
    for r in range(rounds):
        for side in sides:
            side.user_writes(100)
        time.sleep(SETTLE_S)
        for side in sides if r % 2 == 0 else sides[::-1]:
            await side.cycle(timed=True)
    rt_claim = claim_round_trip(with_claims)
    for side in sides:
        await side.close()

    a, b = statistics.median(with_claims.times), statistics.median(without.times)
    added = a / b - 1
    paired = statistics.median(
        x / y - 1 for x, y in zip(with_claims.times, without.times, strict=True)
    )
    ca, cb = statistics.median(with_claims.cpus), statistics.median(without.cpus)
    cpu_paired = statistics.median(
        x / y - 1 for x, y in zip(with_claims.cpus, without.cpus, strict=True)
    )
    low = min(with_claims.times) / min(without.times) - 1
    runs = statistics.median(with_claims.runs)
    print(
        f"lease_overhead: {sessions} sessions, {runs:.0f} units run per cycle, "
        f"{rounds} cycles each, alternating"
    )
    print(
        f"  cycle median with claims    {a * 1000:.1f} ms  "
        f"(min {min(with_claims.times) * 1000:.1f}, max {max(with_claims.times) * 1000:.1f})"
    )
    print(
        f"  cycle median without claims {b * 1000:.1f} ms  "
        f"(min {min(without.times) * 1000:.1f}, max {max(without.times) * 1000:.1f})"
    )
    print(
        f"  added by the claims: {added * 100:+.1f}%  (target under {TARGET * 100:.0f}%); "
        f"median of the rounds' paired differences {paired * 100:+.1f}%"
    )
    print(f"  least disturbed cycles (min against min): {low * 100:+.1f}%")
    print(
        f"  CPU per cycle (this process): {ca * 1000:.1f} ms with claims, {cb * 1000:.1f} ms "
        f"without ({(ca / cb - 1) * 100:+.1f}%; rounds' paired differences "
        f"{cpu_paired * 100:+.1f}%)"
    )
    print(
        f"  one claim + release on this database: {rt_claim * 1000:.2f} ms "
        f"(x {runs:.0f} units = {rt_claim * runs * 1000:.0f} ms per cycle if serial)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=100, help="one task per this many")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    logger.remove()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(Path(tmp), args.sessions, args.every, args.rounds))


if __name__ == "__main__":
    main()
