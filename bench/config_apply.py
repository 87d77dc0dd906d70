"""Seconds from `config set bot.channels.notify.enabled true` on a running gateway to the
first push (issue 42; target under 5 s).

A real gateway (fake OpenAI model, heartbeat off) with `bot.channels.notify.targets`
naming a loopback ntfy-style endpoint (`tests/support/push_endpoint.py`) and the
channel off. Each round: the CLI (a fresh process, as a user types it) sets
`enabled true`; as soon as it returns, a chat through the control API asks the model,
which calls `message` to `notify:phone`; the clock stops when the endpoint has the
push. Then `enabled false` (timed too) for the next round. Printed beside it, the
same change made the way an editor makes it (the file written, no `config set`):
seconds until the gateway's file watcher has started the channel (`/health`); the
gateway's own share (the apply asked by a warm client) and a CLI process's start.
Byte code is cached, as in an installed vikingbot.

    uv run --all-extras --dev python bench/config_apply.py [--rounds 5]
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
from tests.support.gateway_proc import GatewayProcess
from tests.support.push_endpoint import PushEndpoint
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VIKINGBOT_HOME": str(home)}
    env.pop("VIKINGBOT_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "vikingbot", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def notify_running(gw: GatewayProcess) -> bool:
    rows = gw.get("/health")["channels"]
    return any(r["name"] == "notify" and r["running"] for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    # as an installed vikingbot runs: byte code cached (a shell with
    # PYTHONDONTWRITEBYTECODE=1 compiles every module in every command, ~1.7 s here)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    cli(Path(tempfile.gettempdir()) / "vikingbot-bench-warm", "--help")
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAI.start() as llm,
        PushEndpoint.serving() as push,
    ):
        home = Path(tmp) / "home"
        home.mkdir()
        notify = {"enabled": False, "targets": {"phone": push.url("phone")}, "spacingS": 0}
        bot = {
            "agents": {"provider": "openai", "model": "gpt-x"},
            "providers": {"openai": {"apiKey": "sk-b", "apiBase": llm.base_url}},
            "heartbeat": {"enabled": False, "timezone": "UTC"},
            "tools": {"autoApprove": ["message"]},
            "channels": {"cli": {"enabled": False}, "notify": notify},
        }
        config_file = home / "config.json"
        config_file.write_text(json.dumps({"bot": bot}), encoding="utf-8")
        to_push, set_on, set_off, watcher, warm, starts = [], [], [], [], [], []
        with GatewayProcess(home, fork=False) as gw:
            for i in range(args.rounds):
                llm.script([tool_call("message", {"text": f"r{i}", "target": "notify:phone"})])
                llm.then(reply("sent"))
                t0 = time.monotonic()
                done = cli(home, "config", "set", "bot.channels.notify.enabled", "true")
                set_on.append(time.monotonic() - t0)
                assert done.returncode == 0, done.stderr
                chat = cli(home, "chat", "-m", "push it")
                assert chat.returncode == 0, chat.stderr
                push.wait_received(i + 1)
                to_push.append(time.monotonic() - t0)
                t1 = time.monotonic()
                off = cli(home, "config", "set", "bot.channels.notify.enabled", "false")
                set_off.append(time.monotonic() - t1)
                assert off.returncode == 0, off.stderr
            # the gateway's share: the same apply asked by a warm client (no CLI start)
            from vikingbot.gateway.client import GatewayClient

            client = GatewayClient.find(home)
            assert client is not None
            for _ in range(args.rounds):
                t0 = time.monotonic()
                client.request("POST", "/api/v1/config/apply", {})
                warm.append(time.monotonic() - t0)
                t0 = time.monotonic()
                cli(home, "--help")
                starts.append(time.monotonic() - t0)
            # baseline: the file written as an editor would; the watcher finds it
            for _ in range(args.rounds):
                raw = json.loads(config_file.read_text())
                raw["bot"]["channels"]["notify"]["enabled"] = True
                t0 = time.monotonic()
                config_file.write_text(json.dumps(raw), encoding="utf-8")
                while not notify_running(gw):
                    time.sleep(0.02)
                watcher.append(time.monotonic() - t0)
                raw["bot"]["channels"]["notify"]["enabled"] = False
                config_file.write_text(json.dumps(raw), encoding="utf-8")
                while notify_running(gw):
                    time.sleep(0.02)

    def fig(xs: list[float]) -> str:
        return f"median {statistics.median(xs):.2f} s, max {max(xs):.2f} s"

    print(f"rounds: {args.rounds}")
    print(f"config set enabled true -> first push:        {fig(to_push)}  (target < 5 s)")
    print(f"  of which `config set ... true` (returns applied): {fig(set_on)}")
    print(f"  `config set ... false` (returns applied):         {fig(set_off)}")
    print(f"  the gateway's apply from a warm client:            {fig(warm)}")
    print(f"  `vikingbot --help` (a CLI process start):          {fig(starts)}")
    print(f"baseline: file saved -> channel running (watcher): {fig(watcher)}")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
