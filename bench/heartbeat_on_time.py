"""Scheduled entries at their minute, a save applied at once (issue 42), beside the tick-only
gateway.

Two real gateways at the default interval (600 s) run side by side for ``--minutes``
(default 60; ``--quick``: 12) on homes with the same shared HEARTBEAT.md: ``every: 1m``,
``every: 7m``, a ``daily:`` two minutes after the start and ``cron: "*/5 * * * *"``,
against one scripted model (``HEARTBEAT_OK``, in milliseconds). One gateway is this
tree; the other the tick-only version (``--baseline``, default ``ef1b1bd``, unpacked
with ``git archive``). Every entry is seeded as seen a day ago, the ``every:`` ones
first due 30 s after the start.

Printed, for each gateway:
- lateness of the scheduled runs: seconds from each run's due time to its start (the
  ledger's ``at``), median and max per kind and over all (target: median < 2 s, max
  < 15 s); a ``daily:``/``cron:`` slot with no run is counted as missed. The due time
  of an ``every:`` run is the last one's fired time plus the period (this tree stores
  a run on time as fired at its due time; the tick-only version at its start);
- gateway CPU (utime + stime of the process, /proc) over the window, per hour;
- seconds from saving HEARTBEAT.md with a new task to its result in the inbox
  (``--saves`` saves, spread over the window; target < 15 s plus the model's time,
  here ~0). A save not answered within the window is shown as "> window".

    uv run --all-extras --dev python bench/heartbeat_on_time.py [--quick | --minutes N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from _baseline import unpack

from tests.support.gateway_proc import GatewayProcess
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.schedule import latest_slot, next_due
from vikingbot.heartbeat.state import EntryState, HeartbeatState
from vikingbot.store.db import StateStore
from vikingbot.testing.fake_openai import FakeOpenAI, reply

UTCZ = ZoneInfo("UTC")
BASELINE = "ef1b1bd"
TASK = re.compile(r"Report the free space, round (\d+)")


def heartbeat(daily: str, saves: int) -> str:
    tasks = "".join(f"- Report the free space, round {k}\n" for k in range(1, saves + 1))
    return (
        "# Heartbeat Tasks\n\n## Active Tasks\n\n"
        "- every: 1m title: Minute task: Look at the minute\n"
        "- every: 7m title: Seven task: Look at the seven\n"
        f"- daily: {daily} title: Daily task: Write the daily note\n"
        '- cron: "*/5 * * * *" title: Five task: Look at the five\n'
        f"{tasks}\n## Completed\n"
    )


def cpu_seconds(pid: int) -> float:
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Side:
    name: str
    home: Path
    env: dict[str, str]
    gw: GatewayProcess | None = None
    cpu0: float = 0.0
    saves: list[tuple[int, float]] = field(default_factory=list)  # (round, monotonic)
    answered: dict[int, float] = field(default_factory=dict)  # round -> seconds


def write_config(home: Path, llm: FakeOpenAI) -> None:
    import json

    home.mkdir(parents=True, exist_ok=True)
    config = {
        "bot": {
            "agents": {"provider": "openai", "model": "fake-model"},
            "providers": {"openai": {"api_base": llm.base_url, "api_key": "sk-bench"}},
            "channels": {"cli": {"enabled": True}},
            "heartbeat": {"timezone": "UTC"},  # the default interval_seconds: 600
        }
    }
    (home / "config.json").write_text(json.dumps(config))


def seed(home: Path, start: datetime, text: str) -> None:
    """Every scheduled entry seen a day ago; the every: ones first due 30 s after start."""
    store = StateStore.open(f"sqlite:///{home / 'data' / 'state.db'}")
    try:
        states = []
        for e in parse_heartbeat(text).scheduled:
            assert e.schedule is not None
            last = None
            if e.schedule.kind == "every":
                last = start + timedelta(seconds=30 - (e.schedule.every_s or 0))
            states.append(EntryState("shared", e.ident, start - timedelta(days=1), last_fired=last))
        HeartbeatState(store).save_entries(states)
    finally:
        store.close()


def ledger(home: Path) -> list[dict[str, Any]]:
    store = StateStore.open(f"sqlite:///{home / 'data' / 'state.db'}")
    try:
        return HeartbeatState(store).runs(limit=100_000)
    finally:
        store.close()


def inbox_texts(home: Path) -> list[str]:
    from vikingbot.delivery.inbox import Inbox

    store = StateStore.open(f"sqlite:///{home / 'data' / 'state.db'}")
    try:
        return [i.text for i in Inbox(store).items()]
    finally:
        store.close()


def aware(value: Any) -> datetime:
    at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def lateness(
    rows: list[dict[str, Any]], text: str, start: datetime, end: datetime, *, baseline: bool
) -> dict[str, tuple[list[float], int]]:
    """Per schedule kind: the seconds each scheduled run started after its due time, and
    how many clock-time slots in the window had no run."""
    out: dict[str, tuple[list[float], int]] = {}
    for e in parse_heartbeat(text).scheduled:
        sched = e.schedule
        assert sched is not None
        runs = sorted(
            aware(r["at"])
            for r in rows
            if r["entry"] == e.ident and r["decision"] == "run" and r["trigger"] == "scheduled"
        )
        late: list[float] = []
        missed = 0
        if sched.kind == "every":
            period = timedelta(seconds=sched.every_s or 0)
            due = start + timedelta(seconds=30)
            for at in runs:
                late.append((at - due).total_seconds())
                on_time = not baseline and at - due < period
                due = (due if on_time else at) + period
        else:
            slots = []
            t = next_due(sched, start, None, UTCZ)
            while t <= end - timedelta(seconds=15):
                slots.append(t)
                t = next_due(sched, t, t, UTCZ)
            ran = {latest_slot(sched, at, UTCZ): at for at in reversed(runs)}  # first run
            for slot in slots:
                if slot in ran:
                    late.append((ran[slot] - slot).total_seconds())
                else:
                    missed += 1
        kind = f"{sched.kind}: {sched.describe().split(' ', 1)[-1]}"
        out[kind] = (late, missed)
    return out


def stats(values: list[float]) -> str:
    if not values:
        return "no runs"
    return (
        f"median {statistics.median(values):6.1f} s, max {max(values):6.1f} s ({len(values)} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="window length")
    parser.add_argument("--quick", action="store_true", help="a 12-minute window")
    parser.add_argument("--saves", type=int, default=3, help="saves of a new task")
    parser.add_argument("--baseline", default=BASELINE, help="the tick-only commit")
    opts = parser.parse_args()
    from loguru import logger

    logger.remove()  # the state database's migration lines
    minutes = 12.0 if opts.quick else opts.minutes
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load}")
    print(f"window: {minutes:g} min, interval_seconds 600 (the default), {opts.saves} saves")

    def answer(request: Any) -> Any:
        rounds = [int(k) for k in TASK.findall(request.last_user_text or "")]
        return reply(f"free space, round {max(rounds)}") if rounds else reply("HEARTBEAT_OK")

    with tempfile.TemporaryDirectory(prefix="vikingbot-ontime-") as tmp, FakeOpenAI.start() as llm:
        llm.responder = answer
        root = Path(tmp)
        base = unpack(opts.baseline, root / "baseline")
        os.chdir(root)  # ``-m vikingbot`` looks in the working folder first
        sides = [
            Side("this tree", root / "new", {}),
            Side(f"tick-only {opts.baseline}", root / "old", {"PYTHONPATH": str(base)}),
        ]
        start = datetime.now(UTC) + timedelta(seconds=15)  # both gateways up by then
        daily = (start + timedelta(minutes=2, seconds=59)).replace(second=0, microsecond=0)
        first = heartbeat(f"{daily:%H:%M}", 0)
        for s in sides:
            write_config(s.home, llm)
            hb = s.home / "data" / "workspace" / "shared" / "HEARTBEAT.md"
            hb.parent.mkdir(parents=True, exist_ok=True)
            hb.write_text(first)
            seed(s.home, start, first)
        with contextlib.ExitStack() as stack:
            for s in sides:
                s.gw = stack.enter_context(
                    GatewayProcess(s.home, env=s.env, fork=False, start_timeout_s=120)
                )
            assert all(s.gw and s.gw.proc for s in sides)
            for s in sides:
                assert s.gw is not None and s.gw.proc is not None
                s.cpu0 = cpu_seconds(s.gw.proc.pid)
            t0 = time.monotonic()
            window = minutes * 60
            save_at = [window * (k + 0.5) / (opts.saves + 0.5) for k in range(opts.saves)]
            while (now := time.monotonic() - t0) < window:
                if save_at and now >= save_at[0]:
                    save_at.pop(0)
                    k = opts.saves - len(save_at)
                    text = heartbeat(f"{daily:%H:%M}", k)
                    for s in sides:
                        (s.home / "data" / "workspace" / "shared" / "HEARTBEAT.md").write_text(text)
                        s.saves.append((k, time.monotonic()))
                for s in sides:
                    texts = inbox_texts(s.home)
                    for k, saved in s.saves:
                        if k not in s.answered and f"free space, round {k}" in texts:
                            s.answered[k] = time.monotonic() - saved
                time.sleep(0.25)
            used = []
            for s in sides:
                assert s.gw is not None and s.gw.proc is not None
                used.append(cpu_seconds(s.gw.proc.pid) - s.cpu0)
            end = datetime.now(UTC)
        for s, cpu in zip(sides, used, strict=True):
            print(f"\n== {s.name}")
            per = lateness(ledger(s.home), first, start, end, baseline=s is not sides[0])
            every: list[float] = []
            for kind, (late, missed) in per.items():
                extra = f", {missed} slots missed" if missed else ""
                print(f"  lateness {kind:<22} {stats(late)}{extra}")
                every += late
            print(f"  lateness, all scheduled runs   {stats(every)}")
            print(
                f"  gateway CPU: {cpu:.2f} s over {minutes:g} min, "
                f"{cpu * 60 / minutes:.2f} s per hour"
            )
            shown = [
                f"{s.answered[k]:.1f} s" if k in s.answered else "> window" for k, _ in s.saves
            ]
            print(f"  save -> result in the inbox: {', '.join(shown) or 'no saves'}")
        print("\ntargets: lateness median < 2 s, max < 15 s; save -> inbox < 15 s + model time")


if __name__ == "__main__":
    main()
