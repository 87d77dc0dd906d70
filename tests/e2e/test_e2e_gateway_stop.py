"""Stopping with a turn in flight: the first SIGTERM stops within 3 s, a second signal
exits at once, and a SIGTERM echoed at once (a group signal that `uv run` forwards) is
one clean shutdown."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll
from vikingbot.testing.fake_openai import reply

Start = Callable[[Home], GatewayProcess]


def turn_in_flight(home: Home, gw: GatewayProcess) -> threading.Thread:
    """A chat turn through the control API whose model answer takes 60 s."""
    home.llm.script([reply("too late", delay_s=60)])
    out: dict[str, object] = {}

    def chat() -> None:
        out["res"] = home.cli("chat", "-m", "hello", "--json")

    thread = threading.Thread(target=chat, daemon=True)
    thread.start()
    poll(lambda: home.llm.requests, "the turn to reach the model")
    thread.out = out  # type: ignore[attr-defined]
    return thread


def test_first_sigterm_stops_within_3s_with_a_turn_in_flight(home: Home, gateways: Start) -> None:
    home.write_config(gateway={"shutdown_grace_s": 1})  # the default
    gw = gateways(home)
    client = turn_in_flight(home, gw)
    t0 = time.monotonic()
    assert gw.stop(signal.SIGTERM, timeout=10) == 0
    took = time.monotonic() - t0
    assert took < 3.0, f"stopping took {took:.2f}s"
    client.join(10)
    res = client.out["res"]  # type: ignore[attr-defined]
    # the CLI says the gateway went away and exits non-zero
    assert res.returncode == 1
    assert "gateway" in res.stderr
    # the session is consistent: the user's line is kept, no half-written answer
    history = (home.sessions_dir).rglob("*.jsonl")
    for path in history:
        for line in path.read_text().splitlines():
            json.loads(line)


def test_a_second_signal_exits_at_once(home: Home, gateways: Start) -> None:
    home.write_config(gateway={"shutdown_grace_s": 30})
    gw = gateways(home)
    turn_in_flight(home, gw)
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGTERM)
    poll(lambda: "stopping" in gw.read_output(), "the first signal to be seen", timeout=10)
    t0 = time.monotonic()
    gw.proc.send_signal(signal.SIGINT)  # Ctrl-C while it stops
    gw.proc.wait(10)
    assert time.monotonic() - t0 < 1.5
    assert gw.stop() == 1
    assert "second signal" in gw.output


def test_a_group_sigterm_forwarded_again_is_one_clean_shutdown(home: Home, gateways: Start) -> None:
    """A supervisor's SIGTERM to the process group reaches the gateway directly and
    again through `uv run`: that is one request, not "exit now"."""
    home.write_config(gateway={"shutdown_grace_s": 1})
    gw = gateways(home)
    turn_in_flight(home, gw)
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGTERM)
    gw.proc.send_signal(signal.SIGTERM)  # the forwarded copy, right behind it
    gw.proc.wait(10)
    assert gw.stop() == 0
    said = gw.output
    assert "second signal" not in said
    assert "stopped" in said
