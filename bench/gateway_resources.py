"""Gateway resources: time to a first `/health`, idle memory, idle CPU.

Every figure comes from a real ``vikingbot gateway`` child process
(``tests.support.gateway_proc.GatewayProcess``), with every built-in
service on and no model provider: heartbeat (default interval), cron,
housekeeping, the config watcher, and the ``cli`` and ``webhook`` channels
(webhook with an inbound token and an outbound URL nobody is called on).
Slack and Telegram stay off: they need platform accounts. The settings come
from ``VIKINGBOT_*`` variables, so each home starts empty.

1. start to ``/health`` answering: median of ``--starts`` (default 5) fresh
   starts, each in a new empty home (the first-start path: config, folders,
   workspace template, database migrations);
2. resident memory (``VmRSS``) of an idle gateway ``--settle`` seconds after
   it answered (target under 80 MB);
3. CPU seconds (utime + stime) the same gateway uses over ``--idle-seconds``
   (default 600, the heartbeat's interval) with nothing to do, per ten minutes
   (target at most 0.5 s: what a laptop's battery pays). With ``--baseline REV``
   a gateway of that commit (``git archive``, on ``PYTHONPATH``) idles over the
   same window in a home made alike, and its figure is printed beside.

Byte-code is cached under a temporary ``PYTHONPYCACHEPREFIX`` and warmed by
one unmeasured start, as an installed package would have it.

    uv run --dev python bench/gateway_resources.py [--idle-seconds 600] [--starts 5] \\
        [--baseline REV]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from _baseline import unpack

from tests.support.gateway_proc import GatewayProcess

RSS_TARGET_MB = 80.0
CPU_TARGET_S = 0.5  # per ten minutes idle

ALL_SERVICES_ON = {
    "VIKINGBOT_BOT__HEARTBEAT__ENABLED": "true",
    "VIKINGBOT_BOT__CHANNELS__CLI__ENABLED": "true",
    "VIKINGBOT_BOT__CHANNELS__WEBHOOK__ENABLED": "true",
    "VIKINGBOT_BOT__CHANNELS__WEBHOOK__INBOUND_TOKEN": "bench-inbound-token",
    "VIKINGBOT_BOT__CHANNELS__WEBHOOK__OUTBOUND_URLS": json.dumps(["http://127.0.0.1:9/hook"]),
}


def child_env(pycache: Path) -> dict[str, str]:
    """All services on; a warm byte-code cache (an empty value unsets a PYTHON* variable)."""
    env = dict(ALL_SERVICES_ON)
    env["PYTHONDONTWRITEBYTECODE"] = ""
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env["PYTHONPROFILEIMPORTTIME"] = ""
    return env


def proc_status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def rss_mb(pid: int) -> float:
    kb = int(proc_status(pid)["VmRSS"].split()[0])
    return kb / 1024


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads) from /proc/<pid>/stat."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()  # the command name may hold spaces
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of stat(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def start_times(root: Path, env: dict[str, str], starts: int) -> list[float]:
    times = []
    for i in range(starts):
        gw = GatewayProcess(root / f"start-{i}", env=env)
        with gw:
            assert gw.started_in_s is not None
            times.append(gw.started_in_s)
        if gw.returncode != 0:
            raise SystemExit(f"gateway exited {gw.returncode}:\n{gw.output}")
    return times


def check_services(gw: GatewayProcess) -> None:
    health = gw.get("/health")
    down = [name for name, s in health["services"].items() if not s["running"]]
    if down or not health["heartbeat"]["enabled"]:
        raise SystemExit(f"not every service is running: {json.dumps(health, indent=2)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle-seconds", type=float, default=600.0, help="idle CPU window")
    parser.add_argument("--baseline", help="a commit whose gateway idles beside this one")
    parser.add_argument("--starts", type=int, default=5, help="fresh starts to time")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before measuring")
    opts = parser.parse_args()

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load}")
    with tempfile.TemporaryDirectory(prefix="vikingbot-gw-") as tmp:
        root = Path(tmp)
        env = child_env(root / "pycache")
        with GatewayProcess(root / "warm-up", env=env):
            pass  # fills the byte-code cache; not measured

        times = start_times(root, env, opts.starts)
        print(
            f"start_to_health: {statistics.median(times):.2f} s "
            f"(target: none set; median of {len(times)} first starts, min {min(times):.2f} s)"
        )

        base_env = None
        if opts.baseline:
            base = unpack(opts.baseline, root / "baseline")
            base_env = {**child_env(root / "pycache-base"), "PYTHONPATH": str(base)}
            os.chdir(root)  # ``-m vikingbot`` looks in the working folder first
        with contextlib.ExitStack() as stack:
            gw = stack.enter_context(GatewayProcess(root / "idle", env=env))
            old = None
            if base_env is not None:
                old = stack.enter_context(GatewayProcess(root / "idle-base", env=base_env))
                check_services(old)
            assert gw.proc is not None
            pid = gw.proc.pid
            check_services(gw)
            time.sleep(opts.settle)
            rss = rss_mb(pid)
            print(
                f"idle_rss: {rss:.1f} MB (target < {RSS_TARGET_MB:.0f} MB; "
                f"{opts.settle:.0f} s after /health answered)"
            )
            pids = [pid] + ([old.proc.pid] if old is not None and old.proc is not None else [])
            before = [cpu_seconds(p) for p in pids]
            time.sleep(opts.idle_seconds)
            used = [cpu_seconds(p) - b for p, b in zip(pids, before, strict=True)]
            status = proc_status(pid)
            check_services(gw)
            scale = 600.0 / opts.idle_seconds
            print(
                f"idle_cpu: {used[0]:.2f} s over {opts.idle_seconds:.0f} s idle, "
                f"{used[0] * scale:.2f} s per 10 min (target <= {CPU_TARGET_S} s per 10 min)"
            )
            if len(used) > 1:
                print(
                    f"idle_cpu, baseline {opts.baseline}: {used[1]:.2f} s over the same "
                    f"{opts.idle_seconds:.0f} s, {used[1] * scale:.2f} s per 10 min"
                )
            print(
                f"idle_rss_after: {rss_mb(pid):.1f} MB (target: no growth; "
                f"peak VmHWM {status['VmHWM']}, threads {status['Threads']})"
            )
        if gw.returncode != 0:
            raise SystemExit(f"gateway exited {gw.returncode}:\n{gw.output}")


if __name__ == "__main__":
    main()
