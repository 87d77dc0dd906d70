"""What OpenTelemetry tracing costs a turn, on and off (issue 47).

1. Turn overhead: the agent loop's turn of ``agent_loop_overhead.py`` (three
   ``read_file`` calls, then a reply: 4 model-call spans, 3 tool spans, 1 turn
   span) against an in-process provider that answers at once, ``--turns`` times
   with tracing off and as many with it on (the SDK's OTLP/HTTP exporter posting
   to a receiver on loopback), in alternating blocks. Printed: the medians and
   their difference (target: under 2 ms).
2. Import time added when off: a fresh interpreter imports the gateway's modules
   with ``-X importtime``; the OpenTelemetry modules among them and their time
   (target: none, 0 ms).

    uv run --all-extras --dev python bench/trace_overhead.py [--turns 200] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support

from agent_loop_overhead import InstantProvider, make_workspace

from tests.support.otlp import OtlpReceiver
from vikingbot import telemetry
from vikingbot.agent.loop import BuiltinLoop
from vikingbot.clock import SystemClock
from vikingbot.config.schema import Config
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey

TARGET_MS = 2.0
BLOCK = 20
GATEWAY_MODULES = (
    "vikingbot.gateway.supervisor, vikingbot.gateway.compose, vikingbot.agent.loop, "
    "vikingbot.heartbeat.turn, vikingbot.cron.service, vikingbot.delivery.adapter, "
    "vikingbot.telemetry"
)


class Instant(InstantProvider):
    needs_model = False

    def cost(self, tokens_in: int, tokens_out: int, model: str | None = None) -> float:
        return 0.0


async def turns_ms(loop: BuiltinLoop, ws: Path, n: int, start: int) -> list[float]:
    out = []
    for i in range(start, start + n):
        key = SessionKey("bench", "default", f"s{i // 10}")
        t0 = time.perf_counter()
        result = await loop.run_turn("Check the soul file.", key, {"workspace": str(ws)})
        out.append((time.perf_counter() - t0) * 1000)
        assert result.ended == "final", result
    return out


async def overhead(turns: int) -> tuple[float, float, int, tuple[float, float]]:
    with tempfile.TemporaryDirectory() as tmp, OtlpReceiver.start() as rx:
        root = Path(tmp)
        ws = make_workspace(root)
        config = Config.model_validate({"bot": {"agents": {"provider": "openai", "model": "m"}}})
        sessions = SessionStore(root / "sessions", clock=SystemClock())
        provider: object = Instant()
        loop = BuiltinLoop(config, sessions=sessions, provider=provider)  # type: ignore[arg-type]
        await turns_ms(loop, ws, 10, 0)  # warm
        off: list[float] = []
        on: list[float] = []
        done = 10
        while len(off) < turns:
            telemetry.shutdown()
            off += await turns_ms(loop, ws, BLOCK, done)
            done += BLOCK
            telemetry.configure(rx.url, set_global=False)
            on += await turns_ms(loop, ws, BLOCK, done)
            done += BLOCK
        telemetry.flush()
        telemetry.shutdown()
        await loop.aclose()
        per_span = span_cost_us(rx.url)
        return statistics.median(off), statistics.median(on), len(rx.spans), per_span


def span_cost_us(url: str, n: int = 1_500) -> tuple[float, float]:
    """Microseconds per span (a parent with attributes, as the loop makes), off and on."""
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}

    def run() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            with telemetry.span("chat m", attrs) as sp:
                sp.set("gen_ai.usage.input_tokens", 10)
        return (time.perf_counter() - t0) / n * 1e6

    telemetry.shutdown()
    off = run()
    telemetry.configure(url, set_global=False)
    on = run()
    telemetry.shutdown()
    return off, on


def import_cost() -> tuple[list[str], float]:
    code = f"import {GATEWAY_MODULES}"
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    found, total_us = [], 0
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s+(.*)$", line)
        if m and m.group(2).strip().startswith("opentelemetry"):
            found.append(m.group(2).strip())
            total_us += int(m.group(1))
    return found, total_us / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="60 turns each")
    args = ap.parse_args()
    turns = 60 if args.quick else args.turns
    from vikingbot.logs import quiet

    quiet()
    off, on, spans, (span_off, span_on) = asyncio.run(overhead(turns))
    print(f"turn (4 model calls, 3 tool calls), {turns} each, in-process provider:")
    print(f"  tracing off    median {off:7.3f} ms")
    print(
        f"  tracing on     median {on:7.3f} ms   overhead {on - off:+.3f} ms "
        f"({spans} spans exported over OTLP/HTTP)"
    )
    per_turn = (span_on - span_off) * 8 / 1000
    print(
        f"  per span: off {span_off:.2f} us, on {span_on:.2f} us; 8 spans a turn: "
        f"{per_turn:.3f} ms (the turn medians above are within the disk's noise)"
    )
    worst = max(on - off, per_turn)
    print(f"target: overhead < {TARGET_MS:g} ms: {'met' if worst < TARGET_MS else 'MISSED'}")
    modules, ms = import_cost()
    print(
        f"import of the gateway with tracing off: {len(modules)} opentelemetry modules, "
        f"{ms:.1f} ms (target: 0)"
    )


if __name__ == "__main__":
    main()
