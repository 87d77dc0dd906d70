"""Wall time of a turn that spawns 4 sub-agents, each waiting 2 s on the model (issue 46).

The built-in loop, the ``openai`` SDK and the scripted fake OpenAI on loopback. The
parent's first model call asks for 4 ``spawn`` calls and its second answers at once;
each sub-agent's one model call is answered after 2 s. Measured: from the parent's
``run_turn`` to the 4th result handed to the chat's deliverer. Beside it, the same work
in sequence: the parent turn without sub-agents (its two calls) and the 4 tasks as
turns one after another. Target: within 1.2x of 2 s plus one model call (a turn with
one immediate model call, measured in the same run).

    uv run --all-extras --dev python bench/subagents.py [--rounds 3] [--wait 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.config.schema import Config
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_llm import RecordedRequest, Step
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_calls

CHILDREN = 4


class Results:
    def __init__(self) -> None:
        self.texts: list[str] = []
        self.event = asyncio.Event()

    async def __call__(self, text: str, target: str | None = None) -> Any:
        self.texts.append(text)
        if len(self.texts) >= CHILDREN:
            self.event.set()
        return "delivered"


def responder(wait_s: float) -> Any:
    spawn = tool_calls(*[("spawn", {"task": f"JOB-{n}: wait"}) for n in range(CHILDREN)])

    def respond(req: RecordedRequest) -> Step:
        if "You are a sub-agent" in req.text or "JOB-" in req.last_user_text:
            return reply("job done", delay_s=wait_s)
        if "QUICK" in req.last_user_text:
            return reply("ok")
        if any(m.get("role") == "tool" for m in req.messages):
            return reply("started")
        if "ALONE" in req.last_user_text:
            return reply("started")
        return spawn

    return respond


async def main(rounds: int, wait_s: float) -> None:
    with FakeOpenAI.start() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.responder = responder(wait_s)
        config = Config.model_validate(
            {
                "bot": {
                    "agents": {"provider": "openai", "model": "m", "maxSubagents": CHILDREN},
                    "providers": {"openai": {"apiBase": fake.base_url, "apiKey": "k"}},
                }
            }
        )
        loop = BuiltinLoop(config, sessions=SessionStore(Path(tmp) / "sessions"))
        meta = {"workspace": str(Path(tmp) / "ws")}
        one_call: list[float] = []
        parallel: list[float] = []
        sequence: list[float] = []
        for r in range(rounds + 1):
            began = time.perf_counter()
            await loop.run_turn("QUICK", SessionKey("cli", "bench", f"q{r}"), meta)
            one_call.append(time.perf_counter() - began)

            results = Results()
            began = time.perf_counter()
            await loop.run_turn("go", SessionKey("cli", "bench", f"p{r}"), meta, deliver=results)
            await asyncio.wait_for(results.event.wait(), 60)
            parallel.append(time.perf_counter() - began)

            began = time.perf_counter()
            await loop.run_turn("ALONE", SessionKey("cli", "bench", f"s{r}"), meta)
            for n in range(CHILDREN):
                await loop.run_turn(f"JOB-{n}: wait", SessionKey("cli", "bench", f"s{r}-{n}"), meta)
            sequence.append(time.perf_counter() - began)
        await loop.aclose()
    one_call, parallel, sequence = one_call[1:], parallel[1:], sequence[1:]  # warm-up out
    call = statistics.median(one_call)
    target = 1.2 * (wait_s + call)
    par = statistics.median(parallel)
    print(f"{CHILDREN} sub-agents, each waiting {wait_s:g} s on the model; median of {rounds}")
    print(f"  one model call (a turn, immediate answer):   {call:6.3f} s")
    print(
        f"  spawn {CHILDREN}, all results in (parallel):     {par:6.3f} s  (runs: "
        + ", ".join(f"{p:.3f}" for p in parallel)
        + ")"
    )
    print(f"  the same work in sequence:                   {statistics.median(sequence):6.3f} s")
    verdict = "ok" if par <= target else "MISSED"
    print(
        f"  target: within 1.2 x ({wait_s:g} s + one call) = {target:.3f} s: {verdict} "
        f"({par / (wait_s + call):.2f}x)"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--wait", type=float, default=2.0)
    args = ap.parse_args()
    asyncio.run(main(args.rounds, args.wait))
