"""How long the gateway takes to stop after SIGTERM with a turn in flight.

A real gateway process on a small home; a terminal `vikingbot chat -m` turn goes
through the control API and waits on the fake model (it answers after 60 s), so
the turn is in flight when SIGTERM arrives. Measured: SIGTERM to process exit,
median of 5 (target under 3 s, default `bot.gateway.shutdown_grace_s`).
Baseline in the same run: the same stop with nothing running.

    uv run --dev python bench/gateway_stop.py [--runs 5]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll
from vikingbot.testing.fake_openai import FakeOpenAI, reply

TARGET_S = 3.0


def stop_time(home: Home, pycache: Path, *, busy: bool) -> float:
    env = {"PYTHONPYCACHEPREFIX": str(pycache)}
    gw = GatewayProcess(home.path, env=env).start()
    assert gw.proc is not None
    if busy:
        home.llm.reset()
        home.llm.script([reply("too late", delay_s=60)])
        threading.Thread(target=lambda: home.cli("chat", "-m", "hello"), daemon=True).start()
        poll(lambda: home.llm.requests, "the turn to reach the model")
    t0 = time.perf_counter()
    gw.proc.send_signal(signal.SIGTERM)
    gw.proc.wait(60)
    took = time.perf_counter() - t0
    gw.stop()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI.start() as llm:
        telegram = FakeTelegram()
        with telegram.serve() as api:
            root = Path(tmp)
            home = Home(root / "home", llm, telegram, api)
            home.write_config(gateway={"shutdown_grace_s": 1})  # the default
            home.add_user_session()
            busy = [stop_time(home, root / "pycache", busy=True) for _ in range(args.runs)]
            idle = [stop_time(home, root / "pycache", busy=False) for _ in range(args.runs)]
    print(
        f"gateway_stop_with_turn_median_s {statistics.median(busy):.2f}  "
        f"(target < {TARGET_S:.0f}; min {min(busy):.2f}, max {max(busy):.2f}, n={len(busy)})"
    )
    print(f"gateway_stop_idle_median_s {statistics.median(idle):.2f}  (baseline: nothing running)")


if __name__ == "__main__":
    main()
