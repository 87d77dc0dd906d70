"""What the interactive `vikingbot chat` shows, and how fast, when things go wrong.

A real `vikingbot chat` in a pseudo-terminal (pexpect), as a user types into it.

1. The model server is down (its port refuses connections), with the default
   `max_retries` (3): seconds from Enter to the spinner and to the first retry
   line, beside seconds to the final `Error:` line, which is all a user saw
   before (issue 16: "fails after 6.6 s of silence"); for the first turn (typed
   at once, while the model SDK is still being imported) and a second one.
2. Ctrl-C during a turn (the fake model answers after 60 s): seconds from
   Ctrl-C to the prompt being back, median of N, locally and attached to a real
   gateway (there the gateway must also cancel its turn; counted until its log
   says so).

    uv run --dev python bench/chat_feedback.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.chat_terminal import Terminal
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll
from vikingbot.testing.fake_openai import FakeOpenAI, reply


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when we return: connections refused


Figures = tuple[float, float, float, int]


def one_failing_turn(chat: Terminal, at: int) -> tuple[Figures, int]:
    chat.line("hello")
    t0 = time.perf_counter()
    chat.wait_for(r"working · ", after=at)
    spinner = time.perf_counter() - t0
    chat.wait_for(r"retrying", after=at)
    first = time.perf_counter() - t0
    end = chat.wait_for(r"Error:", after=at).end()
    error = time.perf_counter() - t0
    retries = chat.text[at:end].count("retrying in")
    return (spinner, first, error, retries), chat.prompt(end)


def server_down(root: Path) -> tuple[Figures, Figures]:
    """The first turn (the SDK still being imported) and a second one (SDK warm)."""
    home = root / "down"
    home.mkdir()
    bot = {
        "agents": {"provider": "openai", "model": "gpt-test"},
        "providers": {
            "openai": {"apiBase": f"http://127.0.0.1:{closed_port()}/v1", "apiKey": "sk-x"}
        },
    }
    (home / "config.json").write_text(json.dumps({"bot": bot}))
    chat = Terminal.start(home)
    try:
        cold, at = one_failing_turn(chat, chat.prompt())
        warm, _ = one_failing_turn(chat, at)
    finally:
        chat.close()
    return cold, warm


def cancel_times(
    chat: Terminal, llm: FakeOpenAI, runs: int, gw: GatewayProcess | None
) -> list[float]:
    times = []
    at = chat.prompt()
    for i in range(runs):
        llm.reset()
        llm.script([reply("too late", delay_s=60)])
        chat.line(f"slow question {i}")
        poll(lambda: llm.requests, "the turn to reach the model")
        chat.wait_for(r"working · ", after=at)
        chat.wait_cooked()
        t0 = time.perf_counter()
        chat.ctrl_c()
        at = chat.prompt(chat.wait_for(r"turn cancelled", after=at).end())
        if gw is not None:
            seen = i + 1
            poll(
                lambda: gw.read_output().count("client went away") >= seen,  # noqa: B023
                "the gateway to cancel the turn",
            )
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI.start() as llm:
        root = Path(tmp)
        down = server_down(root)
        print("model server down (connection refused), max_retries 3 (the default):")
        print("                                   first turn   second turn")
        for n, what in enumerate(("the spinner", "the first retry line")):
            print(f"  {what:<32} {down[0][n]:6.2f} s     {down[1][n]:6.2f} s")
        print(
            f"  the Error: line ({down[0][3]} retry lines)  {down[0][2]:6.2f} s     "
            f"{down[1][2]:6.2f} s   (before: silence until here)"
        )

        telegram = FakeTelegram()
        with telegram.serve() as api:
            home = Home(root / "home", llm, telegram, api)
            home.write_config()
            chat = Terminal.start(home.path)
            try:
                local = cancel_times(chat, llm, args.runs, None)
            finally:
                chat.close()
            gw = GatewayProcess(home.path).start()
            chat = Terminal.start(home.path)
            try:
                chat.wait_for(r"via the gateway")
                remote = cancel_times(chat, llm, args.runs, gw)
            finally:
                chat.close()
                gw.stop()
    print(f"Ctrl-C during a turn to the prompt back, median of {args.runs}:")
    print(f"  local            {statistics.median(local):6.3f} s   (max {max(local):.3f})")
    print(
        f"  via the gateway  {statistics.median(remote):6.3f} s   "
        f"(max {max(remote):.3f}; until the gateway's log says the turn was cancelled)"
    )


if __name__ == "__main__":
    main()
