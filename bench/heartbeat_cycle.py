"""Heartbeat cycle figures (issue 4).

1. One cycle over 10,000 sessions in per-session mode, 1% with a task, the rest
   with the template: median cycle overhead (the agent answers instantly, so no
   model time), and its ratio to a bare loop that only stats the same
   HEARTBEAT.md files (target: within 3x).
2. Model calls for the same store when every workspace holds the template (0).
3. 20 workspaces with tasks, a fake OpenAI-compatible server taking 1 s per
   call, concurrency 4: cycle wall time (target: under 6 s).

    uv run python bench/heartbeat_cycle.py [--sessions 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _heartbeat_setup import TEMPLATE, fresh, make_runtime, with_tasks, write_session
from loguru import logger

from vikingbot.agent.types import TurnResult
from vikingbot.clock import FakeClock
from vikingbot.heartbeat.service import HeartbeatService
from vikingbot.session.types import SessionKey


class InstantAgent:
    """Answers every turn at once with HEARTBEAT_OK (to measure the heartbeat's own cost)."""

    def __init__(self) -> None:
        self.calls = 0

    async def run_turn(self, prompt: str, key: Any, metadata: Any = None) -> TurnResult:
        self.calls += 1
        return TurnResult(text="HEARTBEAT_OK", model_calls=1)


def build_store(home: Path, n: int, with_task_every: int | None, clock: FakeClock) -> list[Path]:
    rt = make_runtime(home, clock, {"bot": {"sandbox": {"mode": "per-session"}}})
    files = []
    for i in range(n):
        key = SessionKey("telegram", "default", f"user{i}")
        write_session(rt.paths.sessions_dir, key, fresh(clock))
        ws = rt.workspaces.path_for(key)
        ws.mkdir(parents=True, exist_ok=True)
        has_task = with_task_every is not None and i % with_task_every == 0
        text = with_tasks("- Check the inbox") if has_task else TEMPLATE
        (ws / "HEARTBEAT.md").write_text(text)
        files.append(ws / "HEARTBEAT.md")
    rt.close()
    return files


def bare_loop(files: list[Path]) -> float:
    t0 = time.perf_counter()
    for f in files:
        os.stat(f)
    return time.perf_counter() - t0


async def cycles(home: Path, clock: FakeClock, repeat: int) -> tuple[list[float], int]:
    cfg = {"bot": {"sandbox": {"mode": "per-session"}, "heartbeat": {"timezone": "UTC"}}}
    rt = make_runtime(home, clock, cfg)
    agent = InstantAgent()
    svc = HeartbeatService(rt, agent=agent)
    times = []
    await svc.run_cycle("scheduled")  # warm: first-seen rows, caches, database open
    for _ in range(repeat):
        clock.advance(seconds=600)  # one interval later: every task is due again
        t0 = time.perf_counter()
        await svc.run_cycle("scheduled")
        times.append(time.perf_counter() - t0)
    await rt.aclose()
    return times, agent.calls


async def concurrency_case(tmp: Path) -> tuple[float, int]:
    from vikingbot.testing.fake_openai import FakeOpenAI, reply

    clock = FakeClock()
    with FakeOpenAI.start(default=reply("HEARTBEAT_OK", delay_s=1.0)) as fake:
        cfg = {
            "bot": {
                "sandbox": {"mode": "per-session"},
                "agents": {"provider": "openai", "model": "fake"},
                "providers": {"openai": {"api_base": fake.base_url, "api_key": "k"}},
                "heartbeat": {"max_concurrency": 4, "timezone": "UTC"},
            }
        }
        rt = make_runtime(tmp, clock, cfg)
        for i in range(20):
            key = SessionKey("telegram", "default", f"c{i}")
            write_session(rt.paths.sessions_dir, key, fresh(clock))
            ws = rt.workspaces.path_for(key)
            ws.mkdir(parents=True, exist_ok=True)
            (ws / "HEARTBEAT.md").write_text(with_tasks("- Check the inbox"))
        svc = HeartbeatService(rt)
        # the gateway loads the provider SDK at start (in a thread); do the same here so
        # the figure is the heartbeat's, not the one-off import of the SDK
        await rt.agent().ensure_provider()  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        await svc.run_cycle("scheduled")
        wall = time.perf_counter() - t0
        await rt.aclose()
        return wall, len(fake.requests)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    logger.remove()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        clock = FakeClock()
        t0 = time.perf_counter()
        files = build_store(tmp / "mixed", args.sessions, 100, clock)
        print(f"setup: {args.sessions} sessions/workspaces in {time.perf_counter() - t0:.1f} s")
        times, calls = asyncio.run(cycles(tmp / "mixed", clock, args.repeat))
        bare = statistics.median(bare_loop(files) for _ in range(args.repeat))
        med = statistics.median(times)
        print(
            f"cycle over {args.sessions} sessions (1% with a task): median {med * 1000:.0f} ms, "
            f"bare stat loop {bare * 1000:.0f} ms, ratio {med / bare:.1f}x (target within 3x)"
        )
        print(f"  agent turns per cycle: {calls // (args.repeat + 1)}")

        build_store(tmp / "template", args.sessions, None, clock)
        _, calls = asyncio.run(cycles(tmp / "template", clock, 1))
        print(f"model calls with only templates over {args.sessions} sessions: {calls} (target 0)")

        wall, requests = asyncio.run(concurrency_case(tmp / "conc"))
        print(
            f"20 workspaces, 1 s per model call, concurrency 4: cycle {wall:.2f} s "
            f"({requests} calls; target under 6 s)"
        )


if __name__ == "__main__":
    main()
