"""A quiet day for the heartbeat (issue 5): how many model calls does nothing cost?

144 ten-minute ticks on a FakeClock over 50 workspaces in ``per-session`` mode
(one session each), through the real agent loop (provider ``openai`` pointed at
a ``FakeOpenAI`` on loopback that answers ``HEARTBEAT_OK``). The workspaces mix:

- the untouched template;
- stale sessions (last user message 3 days before the day) with tasks;
- ``skip_heartbeat: true`` sessions (as CLI chats have) with tasks;
- guarded entries (``every: 10m only-if: ...``) whose checker finds no work;
- guarded entries whose news is present but unchanged since yesterday;
- three news workspaces: one guarded entry each whose checked content changes
  once during the day (ticks 30, 70, 110), beside an unchanged one.

The target is exactly 3 model calls. Checkers: ``news`` is a ``file`` checker
(no subprocess, so 144 x ~20 checks stay cheap); ``queue`` is a ``command``
checker (``cat <file>``) used by a few entries, so both kinds are exercised.

    uv run --dev python bench/quiet_day.py
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _heartbeat_setup import TEMPLATE, make_runtime, with_tasks, write_session
from loguru import logger

from vikingbot.clock import FakeClock
from vikingbot.gateway import compose
from vikingbot.heartbeat.service import CycleReport
from vikingbot.session.types import SessionKey

DAY_START = datetime(2026, 3, 10, 0, 0, tzinfo=UTC)
TICK_S = 600
TICKS = 144
NEWS_TICKS = (30, 70, 110)
# how many workspaces of each kind (50 in all)
LAYOUT = {
    "template": 14,
    "stale": 8,
    "skip-flag": 6,
    "no-work": 10,  # 8 on the file checker, 2 on the command checker
    "unchanged": 9,  # 7 on the file checker, 2 on the command checker
    "news": 3,
}


@dataclass
class Home:
    feeds: Path
    kinds: dict[str, str] = field(default_factory=dict)  # workspace name -> kind
    news: dict[int, tuple[str, Path, str]] = field(default_factory=dict)  # tick -> change


def guarded(checker: str, scope: str) -> str:
    return (
        f"- every: 10m only-if: {checker}:{scope} title: Feed {scope} "
        f"task: Tell me what is new in feed {scope}."
    )


def build(home: Path, clock: FakeClock, cfg: dict[str, Any]) -> Home:
    feeds = home / "feeds"
    feeds.mkdir(parents=True)
    out = Home(feeds)
    rt = make_runtime(home, clock, cfg)
    fresh_at = DAY_START - timedelta(minutes=30)  # fresh all day (stale_after is 2 days)
    stale_at = DAY_START - timedelta(days=3)
    i = 0

    def workspace(kind: str, text: str, *, last_user: datetime, skip: bool = False) -> str:
        nonlocal i
        key = SessionKey("telegram", "default", f"user{i:02d}")
        i += 1
        write_session(rt.paths.sessions_dir, key, last_user, skip=skip)
        ws = rt.workspaces.path_for(key)
        ws.mkdir(parents=True, exist_ok=True)
        (ws / "HEARTBEAT.md").write_text(text)
        out.kinds[ws.name] = kind
        return ws.name

    def feed(scope: str, content: str | None) -> Path:
        path = feeds / scope
        if content is not None:
            path.write_text(content)
        return path

    for _ in range(LAYOUT["template"]):
        workspace("template", TEMPLATE, last_user=fresh_at)
    # stale and skip-flag workspaces carry work that would wake the model if they were looked at
    for n in range(LAYOUT["stale"]):
        feed(f"st-{n}", "an item nobody has seen\n")
        text = with_tasks("- Check the inbox", guarded("news", f"st-{n}"))
        workspace("stale", text, last_user=stale_at)
    for _ in range(LAYOUT["skip-flag"]):
        workspace("skip-flag", with_tasks("- Check the inbox"), last_user=fresh_at, skip=True)
    for n in range(LAYOUT["no-work"]):
        if n < 2:  # command checker: `cat` of an empty file prints nothing
            feed(f"nq-{n}", "")
            line = guarded("queue", f"nq-{n}")
        else:  # file checker: no file, no work
            line = guarded("news", f"nw-{n}")
        workspace("no-work", with_tasks(line), last_user=fresh_at)
    for n in range(LAYOUT["unchanged"]):
        checker = "queue" if n < 2 else "news"
        feed(f"un-{n}", f"yesterday's item {n}\n")
        workspace("unchanged", with_tasks(guarded(checker, f"un-{n}")), last_user=fresh_at)
    # news: (checker, scope, present before the day?) -- appears, is edited, appears (command)
    plans = [("news", "nx-a", False), ("news", "nx-b", True), ("queue", "nx-c", False)]
    for tick, (checker, scope, present) in zip(NEWS_TICKS, plans, strict=True):
        feed(scope, "old item\n" if present else ("" if checker == "queue" else None))
        feed(f"{scope}-calm", "yesterday's item\n")
        text = with_tasks(guarded(checker, scope), guarded("news", f"{scope}-calm"))
        name = workspace("news", text, last_user=fresh_at)
        out.news[tick] = (name, feeds / scope, f"Feed {scope}")
    rt.close()
    assert sum(LAYOUT.values()) == len(out.kinds) == 50
    return out


def tally(reports: list[CycleReport]) -> tuple[Counter[str], list[Any]]:
    """Decisions of every cycle by reason; returns the breakdown and the rows with model calls.

    The planner's skips are in ``report.decisions`` (quiet workspaces' decisions are
    reused each tick and still counted); a planned ``run`` of a guarded entry is
    settled by the runner (``no-work`` / ``unchanged`` skip, or a real run), so those
    come from the runner's rows (``report.rows``; the ledger in ``report.finished``
    folds repeated skips, so it is not counted here).
    """
    counts: Counter[str] = Counter()
    called = []
    for rep in reports:
        for d in rep.decisions:
            if d.decision == "skip":
                counts[f"skip {d.reason}"] += 1
        for r in rep.rows:
            if r.decision == "run" or r.reason in ("no-work", "unchanged"):
                label = f"{r.decision} {r.reason}"
                if r.decision == "run":
                    label += f" -> {r.outcome}"
                counts[label] += 1
                if r.model_calls:
                    called.append((rep.started_at, r))
    return counts, called


async def day(home: Path, *, verbose: bool) -> None:
    from vikingbot.testing.fake_openai import FakeOpenAI

    warnings: list[str] = []
    logger.add(lambda m: warnings.append(str(m).rstrip()), level="WARNING", format="{message}")
    cat = shutil.which("cat") or "/bin/cat"
    clock = FakeClock(DAY_START - timedelta(minutes=20))
    with FakeOpenAI.start() as fake:  # answers HEARTBEAT_OK to everything
        cfg = {
            "bot": {
                "sandbox": {"mode": "per-session"},
                "agents": {"provider": "openai", "model": "fake"},
                "providers": {"openai": {"api_base": fake.base_url, "api_key": "k"}},
                "heartbeat": {
                    "timezone": "UTC",
                    "interval_seconds": TICK_S,
                    "checkers": {
                        "news": {"kind": "file", "path": str(home / "feeds" / "{scope}")},
                        "queue": {"kind": "command", "command": [cat, str(home / "feeds/{scope}")]},
                    },
                },
            }
        }
        t0 = time.perf_counter()
        setup = build(home, clock, cfg)
        rt = make_runtime(home, clock, cfg)
        svc = compose.heartbeat(rt)  # the real agent: Home.agent(), the openai SDK
        # Yesterday's watermark, by a warm-up through the product itself (not by writing
        # HeartbeatState): at -20 min every entry is first seen; at -10 min every guarded
        # entry is due once, so entries whose feed has content run (the model answers
        # HEARTBEAT_OK) and their signature is stored; the rest record no-work. These
        # calls happen before the day and are not counted.
        await svc.run_cycle("scheduled")
        clock.advance(seconds=TICK_S)
        await svc.run_cycle("scheduled")
        warm_calls = len(fake.requests)
        print(
            f"set-up: 50 workspaces + warm-up in {time.perf_counter() - t0:.1f} s "
            f"(warm-up model calls, not counted: {warm_calls})"
        )

        reports: list[CycleReport] = []
        calls_at: dict[int, int] = {}
        t_day = time.perf_counter()
        for tick in range(1, TICKS + 1):
            clock.advance(seconds=TICK_S)
            change = setup.news.get(tick)
            if change is not None:  # one real piece of news: the checked content changes
                path = change[1]
                with path.open("a") as f:
                    f.write(f"news at tick {tick}\n")
            before = len(fake.requests)
            reports.append(await svc.run_cycle("scheduled"))
            if len(fake.requests) > before:
                calls_at[tick] = len(fake.requests) - before
        wall = time.perf_counter() - t_day
        day_calls = len(fake.requests) - warm_calls

        ledger = [
            r for r in svc.state.runs(limit=1_000_000) if r["at"].replace(tzinfo=UTC) >= DAY_START
        ]
        await rt.aclose()

    non_template = sum(1 for k in setup.kinds.values() if k != "template")
    # A naive heartbeat wakes the model once per tick for every workspace whose
    # HEARTBEAT.md is not the empty template, with no stale / skip-flag / checker /
    # signature rules: (workspaces - template workspaces) x ticks.
    naive = non_template * TICKS
    print(f"model calls on a quiet day: {day_calls} (target 3)")
    print(
        f"a heartbeat that wakes every non-empty workspace on every tick would make: {naive} "
        f"({non_template} non-template workspaces x {TICKS} ticks)"
    )
    print(f"simulated day ({TICKS} ticks): {wall:.1f} s wall, {wall / TICKS * 1000:.0f} ms/tick")

    counts, called = tally(reports)
    print(f"decisions over the day by reason ({sum(counts.values())} in {TICKS} cycles):")
    for label, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:6d}  {label}")
    folded = Counter(f"{r['decision']} {r['reason']}" for r in ledger)
    print(f"run ledger for the day (repeated skips folded): {len(ledger)} rows")
    for label, n in sorted(folded.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:6d}  {label}")

    print("model calls, when and why:")
    ticks_of = {tick: name for tick, (name, _, _) in setup.news.items()}
    for at, r in called:
        tick = int((at - DAY_START).total_seconds() // TICK_S) + 1
        expected = ticks_of.get(tick) == r.workspace
        print(
            f"  tick {tick:3d} {r.workspace} [{setup.kinds.get(r.workspace)}] entry={r.entry!r} "
            f"{r.decision} {r.reason} -> {r.outcome} ({r.model_calls} calls)"
            + ("" if expected else "  <-- NOT NEWS")
        )
    for tick, (name, _, title) in sorted(setup.news.items()):
        hit = any(r.workspace == name and r.entry == title for _, r in called)
        if not hit:
            print(f"  MISSED: news at tick {tick} in {name} ({title}) woke nobody")
    if sum(calls_at.values()) != day_calls:
        print(f"  (requests per tick: {calls_at})")
    if warnings:
        print(f"warnings logged: {len(warnings)}")
        for w in warnings[: 20 if verbose else 5]:
            print(f"  {w[:200]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--verbose", action="store_true", help="show more of the logged warnings")
    args = ap.parse_args()
    logger.remove()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(day(Path(tmp), verbose=args.verbose))
    print(f"total wall time (set-up, warm-up, day): {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
