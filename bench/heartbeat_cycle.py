"""What a heartbeat cycle costs in the production state (issue 12).

One home: 10,000 sessions in per-session mode, each with its own workspace;
1% of the HEARTBEAT.md files hold a task, the rest the template.

1. Production-state cycles, in this process, on a clock that moves one real
   interval (600 s) per cycle, so the hourly safety pass falls on every sixth
   cycle as it would. Before each cycle the previous cycle's turns wrote their
   sessions (the agent appends to its session like the built-in loop), a user
   wrote to some sessions (5, then 100), and 2.1 s of real time passed (the
   folder mtimes settle, as they do in 600 s). A cycle is timed up to the point
   its turns are started (the turns run afterwards and are not timed). Beside
   each cycle, after the same 2.1 s pause (so that neither runs on what the
   other just warmed), a bare loop stats the same 10,000 HEARTBEAT.md files. Once with
   the file watcher, once polling; CPU per cycle (targets: 0.05 s watcher, 0.15 s
   polling).
2. The first cycle after a start, in a fresh process on the same home (its
   state database already filled, as after a restart; target under 1 s), with
   the files as left and cold (the home's pages evicted, beside a bare loop reading
   the same files in the same cache state; with --drop-caches, as root, the
   kernel's page, inode and folder caches emptied, as after a reboot), and the
   time to put the file watch in place.
3. A real ``vikingbot gateway`` on the same home, its cycles in the mix the
   default settings give (an interval of 600 s and the safety pass every 3600 s:
   every sixth cycle looks at every file), compressed in time: by default a 10 s
   interval with the safety pass every 60 s (``--gateway-interval 600`` runs the
   real thing, an hour per window). CPU seconds (utime+stime from /proc) per
   cycle once its second cycle began (the cold first one is item 2), the same
   gateway with the heartbeat off over the same time subtracted (target under
   0.05 s). 100 user sessions are written between cycles; the tasks are
   scheduled ``every: 7d`` (not due), so no model is needed and the figure is
   the heartbeat's own.
4. ``vikingbot heartbeat plan`` and ``plan --json`` without a gateway (target under
   1 s), in fresh processes on the same home, alternating run by run with the same
   commands of ``--baseline REV`` (its ``vikingbot`` package unpacked with ``git
   archive``, default the commit before issue 32's work on plan), with the paired CPU
   ratio; then where a plan's CPU goes, for both: the start (Python, imports, config,
   opening the store, building the service) and ``gateway/ops.heartbeat_plan`` itself,
   in a fresh process without Typer. Then ``vikingbot status`` cold start (target
   under 300 ms).

    uv run --dev python bench/heartbeat_cycle.py [--sessions 10000] [--cycles 7]
        [--gateway-interval 10] [--gateway-cycles 12] [--drop-caches]
        [--parts cycles,first,gateway,cli] [--baseline REV] [--plan-runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support

from _baseline import unpack
from _heartbeat_setup import BENCH_CONFIG, WritingAgent, build_home, make_runtime
from loguru import logger

from vikingbot.clock import FakeClock
from vikingbot.gateway import compose
from vikingbot.session.types import Message, SessionKey

SETTLE_S = 2.1


def _cpu(fn: Any, *args: Any) -> float:
    c0 = time.process_time()
    fn(*args)
    return time.process_time() - c0


def after_a_pause(db: Path, files: list[Path], rounds: int = 5) -> dict[str, tuple[float, float]]:
    """What this machine charges for waking up: each probe right after the same
    SETTLE_S pause as a cycle, then at once again (warm); medians in seconds.

    On some virtual machines the first touch of each page of memory after an idle
    pause costs far more than the work itself (the host refills its mappings), so a
    cycle's fixed work (planning, starting turns, a database read) costs several
    times what it costs warm while a tight stat loop pays little more: the cycle
    ratios printed after it differ between machines by this much."""
    import sqlite3

    def hop() -> None:
        async def go() -> None:
            await asyncio.to_thread(int)  # the thread pool started before the pause

        loop.run_until_complete(go())

    def read() -> None:
        conn.execute("SELECT count(*) FROM heartbeat_workspaces WHERE workspace = '*'").fetchall()

    def stats() -> None:
        for f in files[:1000]:
            os.stat(f)

    loop = asyncio.new_event_loop()
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE heartbeat_workspaces (workspace TEXT PRIMARY KEY)")
    conn.execute("INSERT INTO heartbeat_workspaces VALUES ('*')")
    conn.commit()
    out: dict[str, tuple[float, float]] = {}
    try:
        for probe in (hop, read, stats):  # everything set up and run once before the pauses
            probe()
        for name, probe in (
            ("thread hop", hop),
            ("one-row SQLite read", read),
            ("1,000 stats", stats),
        ):
            cold, warm = [], []
            for _ in range(rounds):
                time.sleep(SETTLE_S)
                t0 = time.perf_counter()
                probe()
                t1 = time.perf_counter()
                probe()
                cold.append(t1 - t0)
                warm.append(time.perf_counter() - t1)
            out[name] = (statistics.median(cold), statistics.median(warm))
    finally:
        conn.close()
        loop.close()
    return out


def bare_loop(files: list[Path]) -> float:
    t0 = time.perf_counter()
    for f in files:
        os.stat(f)
    return time.perf_counter() - t0


class _Split:
    """Where a cycle's time goes: the index's HEARTBEAT.md loop, its sessions part
    (stats, listing, re-reads; or the watcher's events), the rest of the cycle.

    Times the index's own methods on this one instance (nothing else changes)."""

    def __init__(self, index: Any) -> None:
        self.now: dict[str, float] = {}
        parts = (("_poll_files", "files"), ("_poll_sessions", "sessions"), ("_apply", "sessions"))
        for name, part in parts:
            setattr(index, name, self._timed(getattr(index, name), part))

    def _timed(self, fn: Any, part: str) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.now[part] = self.now.get(part, 0.0) + time.perf_counter() - t0

        return timed

    def take(self) -> dict[str, float]:
        out, self.now = self.now, {}
        return out


def user_writes(rt: Any, keys: list[SessionKey], n: int, rnd: random.Random) -> list[Path]:
    paths = []
    for key in rnd.sample(keys, n):
        rt.sessions.append(key, Message("user", "any news?", rt.clock.now()))
        paths.append(rt.sessions.path_for(key))
    return paths


async def production(
    home: Path,
    clock: FakeClock,
    keys: list[SessionKey],
    files: list[Path],
    *,
    watch: bool,
    writes: int,
    cycles: int,
) -> dict[str, Any]:
    rt = make_runtime(home, clock, BENCH_CONFIG)
    agent = WritingAgent(rt)
    svc = compose.heartbeat(rt, agent=agent)  # type: ignore[arg-type]
    rnd = random.Random(writes)
    if watch:
        assert await asyncio.to_thread(svc.scanner.watch), svc.scanner.index.watcher
    await svc.run_cycle("scheduled")  # this process's first cycle: not counted
    await svc.drain(120)
    calls = agent.calls  # turns of the measured cycles only
    times, cpus, bares, passes, bare_cpu = [], [], [], [], []
    split, splits = _Split(svc.scanner.index), []
    for _ in range(cycles):
        clock.advance(seconds=600)
        paths = user_writes(rt, keys, writes, rnd)
        time.sleep(SETTLE_S)
        watcher = svc.scanner.index.watcher
        if watcher is not None:
            watcher.wait_for(paths)
        before = svc.scanner.index._last_full  # a new time: this cycle polled everything
        split.take()
        t0, c0 = time.perf_counter(), time.process_time()
        await svc.run_cycle("scheduled", wait=False)
        times.append(time.perf_counter() - t0)
        splits.append(split.take())
        cpus.append(time.process_time() - c0)
        passes.append(svc.scanner.index._last_full != before)
        await svc.drain(120)  # the turns, not timed
        # the bare loop after the same pause as the cycle: each starts from the CPU
        # caches an interval leaves, neither right after the other's work
        time.sleep(SETTLE_S)
        bares.append(bare_loop(files))
        bare_cpu.append(_cpu(bare_loop, files))
    svc.scanner.close()
    await rt.aclose()
    routine = [t for t, full in zip(times, passes, strict=True) if not full]
    parts = [p for p, full in zip(splits, passes, strict=True) if not full]
    files_s = statistics.median(p.get("files", 0.0) for p in parts) if parts else 0.0
    sessions_s = statistics.median(p.get("sessions", 0.0) for p in parts) if parts else 0.0
    return {
        "files": files_s,
        "sessions": sessions_s,
        "median": statistics.median(times),
        "routine": statistics.median(routine) if routine else float("nan"),
        "safety": max((t for t, full in zip(times, passes, strict=True) if full), default=None),
        "bare": statistics.median(bares),
        "cpu": statistics.median(cpus),
        "bare_cpu": statistics.median(bare_cpu),
        "turns": (agent.calls - calls) / cycles,
        "routines": len(routine),
    }


def report(label: str, r: dict[str, Any], target: str) -> None:
    ratio = r["median"] / r["bare"]
    safety = f"; the hourly full pass {r['safety'] * 1000:.0f} ms" if r["safety"] else ""
    print(
        f"  {label}: cycle median {r['median'] * 1000:.1f} ms (without the hourly pass "
        f"{r['routine'] * 1000:.1f} ms{safety}), bare stat loop {r['bare'] * 1000:.1f} ms, "
        f"ratio {ratio:.2f}x ({target}); CPU {r['cpu'] * 1000:.1f} ms vs "
        f"{r['bare_cpu'] * 1000:.1f} ms; {r['turns']:.0f} turns per cycle"
    )
    rest = r["routine"] - r["files"] - r["sessions"]
    bare = r["bare"]
    print(
        f"    a routine cycle's parts (medians): HEARTBEAT.md loop {r['files'] * 1000:.1f} ms "
        f"({r['files'] / bare:.2f}x the bare loop), sessions {r['sessions'] * 1000:.1f} ms "
        f"({r['sessions'] / bare:.2f}x), planning and starting turns {rest * 1000:.1f} ms "
        f"({rest / bare:.2f}x)"
    )


# ---------------------------------------------------------------- first cycle


def first_cycle_child(home: Path) -> None:
    """Runs in a fresh process: watch start and the first cycle, as JSON on stdout."""
    logger.remove()
    clock = FakeClock(datetime.now(UTC))
    rt = make_runtime(home, clock, BENCH_CONFIG)
    svc = compose.heartbeat(rt, agent=WritingAgent(rt))  # type: ignore[arg-type]

    async def go() -> dict[str, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        await svc.run_cycle("scheduled", wait=False)
        first, cpu = time.perf_counter() - t0, time.process_time() - c0
        await svc.drain(120)
        t0 = time.perf_counter()
        ok = svc.scanner.index.watch()
        watch = time.perf_counter() - t0
        svc.scanner.close()
        await rt.aclose()
        return {"first": first, "cpu": cpu, "watch": watch, "watching": ok}

    print(json.dumps(asyncio.run(go())))


def child(flag: str, home: Path, *, cold: bool) -> dict[str, Any]:
    """This script in a fresh process (``flag`` says which part), its last stdout line
    as JSON; ``cold``: the caches emptied first (:func:`evict`)."""
    if cold:
        evict(home)
    out = subprocess.run(
        [sys.executable, __file__, flag, str(home)],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def first_cycle(home: Path, *, cold: bool = False) -> dict[str, float]:
    """Our first cycle in a fresh process; ``cold``: the home's files out of the page
    cache first (as after a reboot)."""
    return child("--first-cycle-child", home, cold=cold)


def home_files(home: Path) -> tuple[list[str], list[str]]:
    """(the session files, the HEARTBEAT.md files) of the bench's home."""
    sessions = home / "data" / "sessions"
    root = home / "data" / "workspace"
    return (
        sorted(str(sessions / n) for n in os.listdir(sessions) if n.endswith(".jsonl")),
        sorted(str(root / n / "HEARTBEAT.md") for n in os.listdir(root) if n[0] != "."),
    )


DROP_CACHES = False  # --drop-caches: evict() empties the whole machine's caches (root)


def evict(home: Path) -> None:
    """Drop the home's files (sessions, HEARTBEAT.md files, the state database) from the
    page cache, as after a reboot (``posix_fadvise`` DONTNEED: no
    root needed, nothing else on the machine touched; the kernel's inode cache stays).
    With ``--drop-caches`` the kernel's page, inode and folder caches are emptied
    instead (``/proc/sys/vm/drop_caches``: root, the whole machine): a reboot's state."""
    if DROP_CACHES:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return
    sessions, hb = home_files(home)
    extra = [home / "data" / "state.db"]
    for path in [*sessions, *hb, *map(str, extra)]:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fdatasync(fd)  # only clean pages can be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def bare_read_child(home: Path) -> None:
    """Runs in a fresh process: the least a first cycle must do,
    reading each session's metadata line and each HEARTBEAT.md once, nothing else
    (what any system that looks at these files pays); ms on stdout."""
    sessions, hb = home_files(home)
    t0 = time.perf_counter()
    for path in sessions:
        with open(path, "rb") as f:
            f.readline()
    for path in hb:
        with open(path, "rb") as f:
            f.read()
    print(json.dumps({"read": time.perf_counter() - t0}))


def bare_read(home: Path, *, cold: bool) -> float:
    return float(child("--bare-read-child", home, cold=cold)["read"])


# ---------------------------------------------------------------- gateway


def gateway_cpu(
    home: Path, keys: list[SessionKey], interval: float, seconds: float, then: Any
) -> tuple[tuple[float, float], float, int]:
    """(CPU s per cycle with the heartbeat on, minus the same gateway with it off, for
    each of two pairs; raw, the mean of the two; cycles).

    ``then()`` runs while the heartbeat-on gateway still runs, after the measurement.
    """
    import urllib.request

    from gateway_resources import cpu_seconds

    from tests.support.gateway_proc import GatewayProcess
    from vikingbot.session.store import SessionStore

    store = SessionStore(home / "data" / "sessions")
    rnd = random.Random(7)

    def cycles_done(gw: GatewayProcess) -> float:
        with urllib.request.urlopen(gw.base_url + "/metrics", timeout=10) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("vikingbot_heartbeat_cycles_total"):
                    return float(line.split()[-1])
        return 0.0

    def window(enabled: bool, after: Any = None) -> tuple[float, float]:
        env = {
            "VIKINGBOT_BOT__HEARTBEAT__INTERVAL_SECONDS": str(int(interval)),
            # the defaults' ratio: a safety pass every sixth cycle
            "VIKINGBOT_BOT__HEARTBEAT__SAFETY_PASS_S": str(int(interval * 3600 / 600)),
            "VIKINGBOT_BOT__HEARTBEAT__ENABLED": "true" if enabled else "false",
        }
        with GatewayProcess(home, env=env, start_timeout_s=120) as gw:
            assert gw.proc is not None
            # not counted: start-up, the first (cold) cycle, and housekeeping's first pass
            # (it indexes every session once when a gateway starts): wait until quiet
            deadline = time.monotonic() + 300
            while enabled and cycles_done(gw) < 2 and time.monotonic() < deadline:
                time.sleep(0.5)
            until_quiet(gw.proc.pid, 0.25, deadline)
            c0, n0 = cpu_seconds(gw.proc.pid), cycles_done(gw)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for key in rnd.sample(keys, 100):  # a user writes between cycles
                    store.append(key, Message("user", "any news?", datetime.now(UTC)))
                time.sleep(min(interval, max(0.0, end - time.monotonic())))
            used, n = cpu_seconds(gw.proc.pid) - c0, cycles_done(gw) - n0
            if after is not None:
                after()
        return used, n

    # two pairs in the order on, off, off, on: one gateway's CPU differs from the next
    # one's (and the machine drifts) by about as much as the heartbeat costs
    on1, n1 = window(True, then)
    off1, _ = window(False)
    off2, _ = window(False)
    on2, n2 = window(True)
    n1, n2 = max(int(n1), 1), max(int(n2), 1)
    nets = ((on1 - off1) / n1, (on2 - off2) / n2)
    return nets, (on1 / n1 + on2 / n2) / 2, n1 + n2


def until_quiet(pid: int, cpu_s: float, deadline: float) -> None:
    """Wait (until ``deadline``) for 5 s in which the process used under ``cpu_s``
    of CPU: start-up, the first cycle and housekeeping's first pass are over."""
    from gateway_resources import cpu_seconds

    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(5)
        if cpu_seconds(pid) - before < cpu_s:
            return


def _run_ns(pid: int) -> int:
    """Nanoseconds on a CPU of the process's live threads (/proc schedstat: clock ticks
    are too coarse for a quiet gateway)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def idle_cpu_per_s(home: Path, enabled: bool, seconds: float = 60.0) -> float:
    """CPU seconds per second of a gateway between cycles: its first cycle done, no
    writes, the next cycle an hour away (the file watchers' and timers' own cost,
    which a compressed interval under-counts: a real interval has 60 times more of it)."""
    from tests.support.gateway_proc import GatewayProcess

    env = {
        "VIKINGBOT_BOT__HEARTBEAT__INTERVAL_SECONDS": "3600",
        "VIKINGBOT_BOT__HEARTBEAT__ENABLED": "true" if enabled else "false",
    }
    with GatewayProcess(home, env=env, start_timeout_s=120) as gw:
        assert gw.proc is not None
        until_quiet(gw.proc.pid, 0.05, time.monotonic() + 300)
        c0 = _run_ns(gw.proc.pid)
        time.sleep(seconds)
        return (_run_ns(gw.proc.pid) - c0) / 1e9 / seconds


# ---------------------------------------------------------------- CLI


def cli_times(
    home: Path, args: list[str], runs: int, src: Path | None = None
) -> tuple[list[float], list[float]]:
    """(wall s, CPU s of the child) per fresh ``python -m vikingbot <args>`` (``src``: a
    folder holding another checkout's ``vikingbot`` package, run instead of this one)."""
    out = [cli_once(home, args, src) for _ in range(runs + 1)][
        1:
    ]  # the first fills the byte-code cache
    return [w for w, _ in out], [c for _, c in out]


def child_env(home: Path, src: Path | None) -> dict[str, str]:
    """A CLI child's environment: ``home``, a warm byte-code cache, ``src``'s package."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    env["VIKINGBOT_HOME"] = str(home)
    env["PYTHONPYCACHEPREFIX"] = str(home.parent / "pycache")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return env


def cli_once(home: Path, args: list[str], src: Path | None = None) -> tuple[float, float]:
    env = child_env(home, src)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vikingbot", *args],
        env=env,
        cwd=home.parent,  # not the repository: ``-m`` puts the working folder first on sys.path
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"vikingbot {' '.join(args)} exited {proc.returncode}")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def show(what: str, walls: list[float], cpus: list[float], target_ms: int = 1000) -> None:
    print(
        f"vikingbot {what}: median {statistics.median(walls) * 1000:.0f} ms, "
        f"min {min(walls) * 1000:.0f} ms, CPU median {statistics.median(cpus) * 1000:.0f} ms "
        f"(target < {target_ms} ms)"
    )


def plan_beside_baseline(home: Path, runs: int, base: Path, rev: str) -> None:
    """``heartbeat plan`` with no gateway, this checkout and ``rev``'s alternating run by
    run on the same home (each warmed once first)."""
    for cmd in (["heartbeat", "plan"], ["heartbeat", "plan", "--json"]):
        cli_once(home, cmd)
        cli_once(home, cmd, base)
        now, before = [], []
        for _ in range(runs):
            now.append(cli_once(home, cmd))
            before.append(cli_once(home, cmd, base))
        for label, got in (("", now), (f", baseline {rev}", before)):
            show(f"{' '.join(cmd)} (no gateway{label})", [w for w, _ in got], [c for _, c in got])
        ratio = statistics.median(a[1] / b[1] for a, b in zip(now, before, strict=True))
        print(f"  CPU, this checkout / {rev}, paired: {ratio:.2f}x")
    for label, src in (("this checkout", None), (rev, base)):
        splits = [plan_split(home, src) for _ in range(runs)]
        start = statistics.median(x["start"] for x in splits) * 1000
        plan = statistics.median(x["plan"] for x in splits) * 1000
        print(
            f"  where a plan's CPU goes ({label}, in a fresh process without Typer, medians): "
            f"start (Python, imports, config, opening the store, the service) {start:.0f} ms, "
            f"the plan itself (sessions, HEARTBEAT.md files, state rows, planning) {plan:.0f} ms"
        )


PLAN_SPLIT = """
import json, time
from vikingbot.config.loader import load_config
from vikingbot.gateway import compose
from vikingbot.gateway.ops import heartbeat_plan
from vikingbot.logs import quiet
quiet()
config, paths = load_config()
svc = compose.heartbeat(compose.build_home(config, paths))
c0 = time.process_time()
heartbeat_plan(svc, None)
print(json.dumps({"start": c0, "plan": time.process_time() - c0}))
"""


def plan_split(home: Path, src: Path | None) -> dict[str, float]:
    """CPU seconds before and of ``heartbeat_plan`` in a fresh process (``src``: that
    checkout's package)."""
    env = child_env(home, src)
    out = subprocess.run(
        [sys.executable, "-c", PLAN_SPLIT],
        env=env,
        cwd=home.parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--cycles", type=int, default=7)
    ap.add_argument("--gateway-interval", type=float, default=10.0)
    ap.add_argument("--gateway-cycles", type=int, default=12)
    ap.add_argument(
        "--baseline",
        default="dcd8fa9",
        help="git revision whose `heartbeat plan` (no gateway) runs beside this checkout's, "
        "alternating (empty: none)",
    )
    ap.add_argument("--plan-runs", type=int, default=5, help="runs of each plan command")
    ap.add_argument("--first-cycle-child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--bare-read-child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument(
        "--drop-caches",
        action="store_true",
        help="for the cold first cycles, empty the kernel's page, inode and folder caches "
        "(root; affects the whole machine) instead of evicting the home's pages",
    )
    ap.add_argument(
        "--parts",
        default="cycles,first,gateway,cli",
        help="comma-separated subset of cycles, first, gateway, cli",
    )
    args = ap.parse_args()
    if args.first_cycle_child:
        first_cycle_child(args.first_cycle_child)
        return
    if args.bare_read_child:
        bare_read_child(args.bare_read_child)
        return
    global DROP_CACHES
    DROP_CACHES = args.drop_caches
    logger.remove()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load}")
    with tempfile.TemporaryDirectory(prefix="vikingbot-cycle-") as tmp:
        home = Path(tmp) / "home"
        # the production cycles' clock moves one interval per cycle, far ahead of the
        # real one: it starts in the past, so that what they store (decisions and their
        # times) is history to the parts that run on the real clock (the first cycle, the
        # gateway), as it would be; a stored decision from the future is never replaced
        now = datetime.now(UTC) - timedelta(seconds=600 * (args.cycles + 1) * 4 + 3600)
        t0 = time.perf_counter()
        keys, files = build_home(
            home, args.sessions, task_every=100, task="- Check the inbox", now=now
        )
        print(f"setup: {args.sessions} sessions/workspaces in {time.perf_counter() - t0:.1f} s")
        clock = FakeClock(now)
        parts = set(args.parts.split(","))
        if "cycles" in parts:
            print(f"production-state cycles over {args.sessions} sessions (1% with a task):")
            woke = after_a_pause(Path(tmp) / "probe.db", files)
            shown = ", ".join(
                f"{name} {cold * 1000:.2f} ms ({warm * 1000:.2f} warm, {cold / warm:.0f}x)"
                for name, (cold, warm) in woke.items()
            )
            print(f"  this machine after a {SETTLE_S} s pause (medians of 5 pauses): {shown}")
        for writes in (5, 100) if "cycles" in parts else ():
            for watch in (True, False):
                r = asyncio.run(
                    production(
                        home, clock, keys, files, watch=watch, writes=writes, cycles=args.cycles
                    )
                )
                label = f"{'watcher' if watch else 'polling'}, {writes} user sessions written"
                report(label, r, "CPU target < 50 ms" if watch else "CPU target < 150 ms")

        first = first_cycle(home) if "first" in parts else None
        if first:
            print(
                f"first cycle after start (fresh process, state database filled): "
                f"{first['first'] * 1000:.0f} ms, CPU {first['cpu'] * 1000:.0f} ms "
                f"(target < 1000 ms); putting the file watch in "
                f"place: {first['watch'] * 1000:.0f} ms (watching: {first['watching']})"
            )
            state = (
                "the kernel's caches emptied (a reboot)"
                if DROP_CACHES
                else "the home's files out of the page cache (inodes still cached)"
            )
            cold = first_cycle(home, cold=True)
            bare = bare_read(home, cold=True)
            print(
                f"  the same, {state}: {cold['first'] * 1000:.0f} ms, CPU "
                f"{cold['cpu'] * 1000:.0f} ms; a bare loop reading each session's metadata "
                f"line and each HEARTBEAT.md once, in a fresh process, the same cache state: "
                f"{bare * 1000:.0f} ms (ratio {cold['first'] / bare:.2f}x)"
            )

        weekly = "- every: 7d title: Weekly task: Write the weekly report"
        for i in range(0, len(files), 100):  # the gateway has no model: nothing may fall due
            files[i].write_text(files[i].read_text().replace("- Check the inbox", weekly))

        def plan_via_gateway() -> None:
            for cmd in (["heartbeat", "plan"], ["heartbeat", "plan", "--json"]):
                show(
                    f"{' '.join(cmd)} (a gateway runs: it plans from its index)",
                    *cli_times(home, cmd, 3),
                )

        if "gateway" in parts:
            every = args.gateway_interval
            nets, raw, n = gateway_cpu(
                home, keys, every, every * args.gateway_cycles, plan_via_gateway
            )
            net = statistics.mean(nets)
            print(
                f"gateway CPU per cycle (the default interval's mix: interval {every:.0f} s, "
                f"safety pass every {every * 6:.0f} s, {n} cycles in two on/off pairs, 100 user "
                f"sessions written per cycle): {net:.3f} s net of the same gateway with the "
                f"heartbeat off (pairs {nets[0]:.3f}, {nets[1]:.3f}; {raw:.3f} s raw) "
                f"(target < 0.05 s)"
            )
            # one gateway's idle CPU differs from the next one's by more than the
            # watcher costs: pairs of windows, on then off, and the median difference
            pairs = [
                (idle_cpu_per_s(home, True, 30.0), idle_cpu_per_s(home, False, 30.0))
                for _ in range(3)
            ]
            idle = max(0.0, statistics.median(on - off for on, off in pairs))
            real = net + idle * (600 - every)
            shown = ", ".join(f"{on * 1000:.3f}/{off * 1000:.3f}" for on, off in pairs)
            print(
                f"  between cycles: ms CPU per second with the heartbeat on/off, three "
                f"pairs of 30 s windows: {shown}; median difference "
                f"{idle * 1000:.3f} ms/s; at the real 600 s interval each cycle carries "
                f"{idle * (600 - every):.3f} s of that: {real:.3f} s per cycle in all "
                f"(target < 0.05 s)"
            )

        if "cli" in parts:
            base = unpack(args.baseline, Path(tmp) / "baseline") if args.baseline else None
            if base is None:
                for cmd in (["heartbeat", "plan"], ["heartbeat", "plan", "--json"]):
                    show(f"{' '.join(cmd)} (no gateway)", *cli_times(home, cmd, 3))
            else:
                plan_beside_baseline(home, args.plan_runs, base, args.baseline)
            show("status", *cli_times(home, ["status"], 10), target_ms=300)


if __name__ == "__main__":
    main()
