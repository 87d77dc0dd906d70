"""Seconds from a primary model's outage to a fallback's answer (issue 47).

Two scripted fakes on loopback, the real ``openai`` SDK: ``primary``
(``max_retries`` 2, ``timeout_s`` 2) and ``backup`` (``bot.agents.fallback_models``).
For each kind of outage a fresh loop runs one chat turn and the time to its
answer is printed beside the target, the primary's retry budget plus one call:

- 503 on every try: the budget is the time the primary alone takes to give up
  (measured the same way, with no fallback configured);
- the primary hangs: the budget is its ``timeout_s``;
- the next turn during the outage (the primary rests for ``fallback_probe_s``):
  one call, straight to the backup.

One call is the median of a few turns answered by the backup directly.

    uv run --all-extras --dev python bench/fallback_latency.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.clock import SystemClock
from vikingbot.config.schema import Config
from vikingbot.logs import quiet
from vikingbot.session.store import SessionStore
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply

TIMEOUT_S = 2.0
SLACK_S = 0.25  # scheduling on a shared machine


def config(primary: str, backup: str, *, fallback: bool = True) -> Config:
    agents: dict[str, Any] = {"provider": "primary", "model": "big"}
    if fallback:
        agents["fallbackModels"] = [{"provider": "backup", "model": "small"}]
    return Config.model_validate(
        {
            "bot": {
                "agents": agents,
                "providers": {
                    "primary": {
                        "kind": "openai",
                        "apiBase": primary,
                        "apiKey": "k",
                        "maxRetries": 2,
                        "timeoutS": TIMEOUT_S,
                    },
                    "backup": {"kind": "openai", "apiBase": backup, "apiKey": "k"},
                },
            }
        }
    )


async def turn(loop: BuiltinLoop, ws: Path, n: int) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = await loop.run_turn("hello", f"cli:default:b{n}", {"workspace": str(ws)})
    return time.perf_counter() - t0, result


async def main() -> None:
    quiet()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI.start() as p, FakeOpenAI.start() as b:
        root = Path(tmp)
        ws = root / "ws"
        ws.mkdir()
        sessions = SessionStore(root / "sessions", clock=SystemClock())
        b.default = reply("from the backup")

        def loop(cfg: Config) -> BuiltinLoop:
            return BuiltinLoop(cfg, sessions=sessions)

        direct = loop(config(b.base_url, b.base_url, fallback=False))
        await turn(direct, ws, 0)  # warm: the SDK's imports
        one_call = statistics.median([(await turn(direct, ws, i))[0] for i in range(1, 6)])

        alone = loop(config(p.base_url, b.base_url, fallback=False))
        await turn(alone, ws, 9)
        p.default = error(503)
        budget_503, failed = await turn(alone, ws, 10)
        assert failed.ended == "error" and failed.provider_down

        chain = loop(config(p.base_url, b.base_url))
        await turn(chain, ws, 19)  # warm with the primary answering
        p.reset()
        p.default = error(503)
        outage_503, first = await turn(chain, ws, 20)
        assert first.model == "backup/small", first
        resting, second = await turn(chain, ws, 21)
        assert second.model == "backup/small"

        hang = loop(config(p.base_url, b.base_url))
        p.default = reply("too late", delay_s=60)
        outage_hang, third = await turn(hang, ws, 30)
        assert third.model == "backup/small"
        p.release()
        for item in (direct, alone, chain, hang):
            await item.aclose()

    print(f"one call to the backup (median of 5 turns): {one_call:.3f} s")
    rows = [
        ("primary answers 503 (2 SDK retries)", outage_503, budget_503 + one_call),
        (f"primary hangs (timeout_s {TIMEOUT_S:g})", outage_hang, TIMEOUT_S + one_call),
        ("next turn during the outage (resting)", resting, one_call),
    ]
    for label, took, target in rows:
        verdict = "met" if took <= target + SLACK_S else "MISSED"
        print(f"  {label:<40} answer after {took:6.3f} s; target {target:6.3f} s: {verdict}")
    print(f"(the primary alone gives up on 503 after {budget_503:.3f} s: its retry budget)")


if __name__ == "__main__":
    asyncio.run(main())
