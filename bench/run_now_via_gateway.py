"""`vikingbot heartbeat run-now --json` typed while the gateway runs: wall time per call.

A small home (one workspace with one task, the owner's Telegram chat) against a
real gateway process, the fake OpenAI server answering at once (a `message` call,
then HEARTBEAT_OK) and the fake Telegram Bot API. Between calls a user message is
written to the owner's session (as a live chat does). Each call is a fresh
`python -m vikingbot` process, so the figure includes CLI start (warm byte-code
cache, as an installed package has it). Baselines in the same run: the same
command with no gateway running (the turn runs in the CLI process), the same
request from a warm in-process client (the gateway's share), `vikingbot --help`
(Typer's start) and `python -c pass` (the interpreter's start). With a gateway,
`run-now --json` skips Typer altogether (vikingbot/cli/launch.py).

    uv run --dev python bench/run_now_via_gateway.py [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll, with_tasks
from vikingbot.testing.fake_openai import FakeOpenAI, tool_call

TARGET_MS = 400.0


def cli_env(home: Path, pycache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    env.update(
        VIKINGBOT_HOME=str(home),
        PYTHONDONTWRITEBYTECODE="",
        PYTHONPYCACHEPREFIX=str(pycache),
        PYTHONPROFILEIMPORTTIME="",
    )
    return {k: v for k, v in env.items() if v != ""}


def run_now(home: Home, env: dict[str, str]) -> tuple[float, list[dict[str, object]]]:
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "vikingbot", "heartbeat", "run-now", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"run-now failed ({res.returncode}):\n{res.stderr}")
    return took, json.loads(res.stdout)


def series(home: Home, env: dict[str, str], runs: int, label: str) -> list[float]:
    times: list[float] = []
    for i in range(runs):
        home.add_user_session(text=f"note {i}")  # a session written between calls
        home.llm.script([tool_call("message", {"text": f"news {label} {i}"}), "HEARTBEAT_OK"])
        took, rows = run_now(home, env)
        ran = [r for r in rows if r["decision"] == "run"]
        if len(ran) != 1:
            raise SystemExit(f"expected one run, got {rows}")
        times.append(took)
    return times


def api_series(home: Home, runs: int) -> list[float]:
    """The same request straight to the control API from this process (no CLI start)."""
    from vikingbot.config.loader import load_config
    from vikingbot.gateway.client import GatewayClient

    _, paths = load_config(
        home.path / "config.json", create=False, environ={"VIKINGBOT_HOME": str(home.path)}
    )
    client = GatewayClient.discover(paths)
    assert client is not None, "no gateway found"
    times = []
    for i in range(runs):
        home.add_user_session(text=f"api note {i}")
        home.llm.script([tool_call("message", {"text": f"news api {i}"}), "HEARTBEAT_OK"])
        t0 = time.perf_counter()
        client.post("/api/v1/heartbeat/run-now", {"workspace": None, "force": False})
        times.append(time.perf_counter() - t0)
    return times


def command_series(args: list[str], env: dict[str, str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *args], env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI.start() as llm:
        telegram = FakeTelegram()
        with telegram.serve() as api:
            root = Path(tmp)
            pycache = root / "pycache"
            home = Home(root / "home", llm, telegram, api)
            home.write_config(heartbeat={"timezone": "UTC", "interval_seconds": 86400})
            home.add_user_session()
            env = cli_env(home.path, pycache)
            # warm the byte-code cache for the CLI
            subprocess.run(
                [sys.executable, "-m", "vikingbot", "--help"],
                env=env,
                check=True,
                capture_output=True,
            )
            home.write_heartbeat(with_tasks("- Check whether the VPS disk is over 90%"))

            local = series(home, env, args.runs, "local")
            cli_help = command_series(["-m", "vikingbot", "--help"], env, args.runs)
            python = command_series(["-c", "pass"], env, args.runs)

            with GatewayProcess(home.path, env={"PYTHONPYCACHEPREFIX": str(pycache)}) as gw:
                poll(lambda: home.ledger(), "the gateway's first cycle")
                sent_before = len(telegram.sent)
                via = series(home, env, args.runs, "gateway")
                api = api_series(home, args.runs)
                telegram.wait_for_sent(sent_before + 2 * args.runs)
                delivered = len(telegram.sent) - sent_before - args.runs
            assert gw.returncode == 0

    med = statistics.median(via) * 1000
    print(
        f"run_now_via_gateway_median_ms {med:.0f}  (target < {TARGET_MS:.0f}; "
        f"min {min(via) * 1000:.0f}, max {max(via) * 1000:.0f}, n={len(via)})"
    )
    print(
        f"run_now_local_median_ms {statistics.median(local) * 1000:.0f}  "
        f"(baseline: no gateway, the turn runs in the CLI; min {min(local) * 1000:.0f})"
    )
    print(
        f"control_api_run_now_median_ms {statistics.median(api) * 1000:.0f}  "
        "(the gateway's share: the same request from a warm client)"
    )
    print(
        f"cli_help_median_ms {statistics.median(cli_help) * 1000:.0f}  "
        "(CLI start alone: `vikingbot --help`)"
    )
    print(
        f"python_start_median_ms {statistics.median(python) * 1000:.0f}  "
        "(the interpreter alone: `python -c pass`)"
    )
    print(f"delivered_to_telegram {delivered}/{args.runs}")


if __name__ == "__main__":
    main()
