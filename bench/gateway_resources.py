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
   (default 60) with nothing to do (target under 0.5 s).

Byte-code is cached under a temporary ``PYTHONPYCACHEPREFIX`` and warmed by
one unmeasured start, as an installed package would have it.

    uv run --dev python bench/gateway_resources.py [--idle-seconds 60] [--starts 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.gateway_proc import GatewayProcess

RSS_TARGET_MB = 80.0
CPU_TARGET_S = 0.5

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
    parser.add_argument("--idle-seconds", type=float, default=60.0, help="idle CPU window")
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

        with GatewayProcess(root / "idle", env=env) as gw:
            assert gw.proc is not None
            pid = gw.proc.pid
            check_services(gw)
            time.sleep(opts.settle)
            rss = rss_mb(pid)
            print(
                f"idle_rss: {rss:.1f} MB (target < {RSS_TARGET_MB:.0f} MB; "
                f"{opts.settle:.0f} s after /health answered)"
            )
            before = cpu_seconds(pid)
            time.sleep(opts.idle_seconds)
            used = cpu_seconds(pid) - before
            status = proc_status(pid)
            check_services(gw)
            print(
                f"idle_cpu: {used:.2f} s (target < {CPU_TARGET_S} s; over "
                f"{opts.idle_seconds:.0f} s idle)"
            )
            print(
                f"idle_rss_after: {rss_mb(pid):.1f} MB (target: no growth; "
                f"peak VmHWM {status['VmHWM']}, threads {status['Threads']})"
            )
        if gw.returncode != 0:
            raise SystemExit(f"gateway exited {gw.returncode}:\n{gw.output}")


if __name__ == "__main__":
    main()
