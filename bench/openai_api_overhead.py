"""The OpenAI-compatible endpoint's overhead against the control API's chat (issue 47).

One real ``vikingbot gateway`` child process, its model a scripted fake on loopback
that answers at once. The same turn (a one-line prompt, a one-line reply, a fresh
session each time so history stays equal) is sent ``--turns`` times through each
door, in rotating order, over kept-alive connections:

- ``POST /api/v1/chat`` with the control secret (the baseline);
- ``POST /v1/chat/completions`` with a client token (whole answer), and with
  ``stream: true`` (time to the last byte).

Printed: the median wall time of each and the difference to the baseline
(target: under 5 ms).

    uv run --all-extras --dev python bench/openai_api_overhead.py [--turns 60] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support

import httpx

from tests.support.gateway_proc import GatewayProcess
from vikingbot.openai_api.tokens import TokenStore, tokens_file
from vikingbot.testing.fake_openai import FakeOpenAI, reply

TARGET_MS = 5.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--quick", action="store_true", help="15 turns each")
    args = ap.parse_args()
    turns = 15 if args.quick else args.turns
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI.start() as fake:
        fake.default = reply("pong")
        home = Path(tmp) / "home"
        home.mkdir()
        cfg = {
            "bot": {
                "agents": {"provider": "openai", "model": "m", "historyWindow": 0},
                "providers": {"openai": {"apiBase": fake.base_url, "apiKey": "k"}},
            }
        }
        (home / "config.json").write_text(json.dumps(cfg))
        token = TokenStore(tokens_file(home / "data")).add("bench", ("chat",))
        with GatewayProcess(home, fork=False) as gw:
            secret = (home / "run" / "control.secret").read_text().strip()
            times: dict[str, list[float]] = {"control": [], "openai": [], "openai-stream": []}
            with httpx.Client(base_url=gw.base_url, timeout=60) as http:

                def control(i: int) -> None:
                    r = http.post(
                        "/api/v1/chat",
                        headers={"authorization": f"Bearer {secret}"},
                        json={"text": "ping", "session": f"cli:default:c{i}"},
                    )
                    assert r.status_code == 200 and r.json()["reply"] == "pong", r.text

                def openai(i: int, stream: bool) -> None:
                    body = {
                        "model": "vikingbot",
                        "messages": [{"role": "user", "content": "ping"}],
                        "user": f"o{i}-{stream}",
                        "stream": stream,
                    }
                    auth = {"authorization": f"Bearer {token}"}
                    r = http.post("/v1/chat/completions", headers=auth, json=body)
                    assert r.status_code == 200 and "pong" in r.text, r.text

                for i in range(3):  # warm: the provider, the SDK, the connections
                    control(1000 + i)
                    openai(1000 + i, False)
                for i in range(turns):
                    doors = [
                        ("control", lambda i=i: control(i)),
                        ("openai", lambda i=i: openai(i, False)),
                        ("openai-stream", lambda i=i: openai(i, True)),
                    ]
                    shift = i % 3  # each door goes first as often: no order bias
                    for name, call in doors[shift:] + doors[:shift]:
                        t0 = time.perf_counter()
                        call()
                        times[name].append((time.perf_counter() - t0) * 1000)
    base = statistics.median(times["control"])
    print(f"turns per door: {turns} (same turn, fake model answering at once)")
    print(f"  /api/v1/chat (baseline)           median {base:7.2f} ms")
    for name, label in (("openai", "/v1/chat/completions"), ("openai-stream", "  ... stream")):
        med = statistics.median(times[name])
        print(f"  {label:<33} median {med:7.2f} ms   overhead {med - base:+6.2f} ms")
    worst = max(statistics.median(times[n]) for n in ("openai", "openai-stream")) - base
    verdict = "met" if worst < TARGET_MS else "MISSED"
    print(f"target: overhead < {TARGET_MS:g} ms: {verdict} ({worst:+.2f} ms)")


if __name__ == "__main__":
    main()
