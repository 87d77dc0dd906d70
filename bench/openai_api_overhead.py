"""The OpenAI-compatible endpoint's overhead against the control API's chat (issue 47).

One real ``vikingbot gateway`` child process, its model a scripted fake on loopback
that answers at once. The same turn (a one-line prompt, a one-line reply, a fresh
session each time so history stays equal) is sent ``--turns`` times through each
door, in rotating order, over kept-alive connections:

- ``POST /api/v1/chat`` with the control secret (the baseline);
- ``POST /v1/chat/completions`` with a client token (whole answer), and with
  ``stream: true`` (time to the last byte).

Printed: the median wall time of each and the difference to the baseline
(target: under 5 ms). Then time to first chunk: a model writing word by word
(``tests/support/trickle_model.py``, ``--words`` words, 50 ms apart) streamed
through ``stream: true`` (time to the first text chunk and to the last), beside the
non-streamed answer's time (when a final-only stream, as before issue 47's
streaming, sent its first chunk).

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
from tests.support.trickle_model import TrickleModel
from vikingbot.openai_api.tokens import TokenStore, tokens_file
from vikingbot.testing.fake_openai import FakeOpenAI, reply

TARGET_MS = 5.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--quick", action="store_true", help="15 turns each, 3 slow ones")
    ap.add_argument("--words", type=int, default=40, help="the slow model's reply, in words")
    args = ap.parse_args()
    turns = 15 if args.quick else args.turns
    slow_turns = 3 if args.quick else 6
    words = [f"w{i} " for i in range(args.words)]
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAI.start() as fake,
        TrickleModel.start(words, every_s=0.05) as trickle,
    ):
        fake.default = reply("pong")
        home = Path(tmp) / "home"
        home.mkdir()
        slow = {"kind": "openai", "apiBase": trickle.base_url, "apiKey": "k"}
        cfg = {
            "bot": {
                "agents": {
                    "provider": "openai",
                    "model": "m",
                    "historyWindow": 0,
                    "fallbackModels": [{"provider": "slow", "model": "trickle"}],
                },
                "providers": {"openai": {"apiBase": fake.base_url, "apiKey": "k"}, "slow": slow},
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
                first_last = [slow_stream(http, token, i) for i in range(slow_turns)]
                whole = [slow_whole(http, token, i) for i in range(slow_turns)]
    base = statistics.median(times["control"])
    print(f"turns per door: {turns} (same turn, fake model answering at once)")
    print(f"  /api/v1/chat (baseline)           median {base:7.2f} ms")
    for name, label in (("openai", "/v1/chat/completions"), ("openai-stream", "  ... stream")):
        med = statistics.median(times[name])
        print(f"  {label:<33} median {med:7.2f} ms   overhead {med - base:+6.2f} ms")
    worst = max(statistics.median(times[n]) for n in ("openai", "openai-stream")) - base
    verdict = "met" if worst < TARGET_MS else "MISSED"
    print(f"target: overhead < {TARGET_MS:g} ms: {verdict} ({worst:+.2f} ms)")
    first = statistics.median(f for f, _ in first_last)
    last = statistics.median(t for _, t in first_last)
    final_only = statistics.median(whole)
    print(
        f"time to first chunk ({slow_turns} turns, a model writing {len(words)} words 50 ms apart):"
    )
    print(f"  stream: true, streamed            first chunk {first:7.1f} ms   last {last:7.1f} ms")
    print(f"  final-only (the whole answer)     first chunk {final_only:7.1f} ms")
    print(f"  the first words come {final_only - first:.0f} ms sooner")


def _slow_body(i: int, stream: bool) -> dict[str, object]:
    return {
        "model": "slow/trickle",
        "messages": [{"role": "user", "content": "write"}],
        "user": f"slow{i}-{stream}",
        "stream": stream,
    }


def slow_stream(http: httpx.Client, token: str, i: int) -> tuple[float, float]:
    """Milliseconds to the first text chunk and to the last of a streamed turn."""
    auth = {"authorization": f"Bearer {token}"}
    t0 = time.perf_counter()
    first = last = 0.0
    with http.stream("POST", "/v1/chat/completions", headers=auth, json=_slow_body(i, True)) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                last = (time.perf_counter() - t0) * 1000
                first = first or last
    assert first > 0, "no text chunk came"
    return first, last


def slow_whole(http: httpx.Client, token: str, i: int) -> float:
    """Milliseconds to the whole (non-streamed) answer of the same turn."""
    auth = {"authorization": f"Bearer {token}"}
    t0 = time.perf_counter()
    r = http.post("/v1/chat/completions", headers=auth, json=_slow_body(i, False))
    assert r.status_code == 200 and "w0" in r.text, r.text
    return (time.perf_counter() - t0) * 1000


if __name__ == "__main__":
    main()
