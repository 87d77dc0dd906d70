"""Chat turn time while an MCP server hangs in ``initialize``, over 20 turns.

    uv run --all-extras --dev python bench/mcp_stuck.py [--turns 20] [--wait 15]

A built-in agent loop (fake OpenAI model on loopback) with two MCP servers: the official
reference time server's stand-in that works (tests/support/mcp_faults.py, on the SDK) and
a server that never answers ``initialize``. Each turn is timed; a turn that waited for the
stuck server takes about ``--wait`` s (the hub's turn wait, 15 s by default). Target: at
most one waiting turn per back-off period (the first 30 s).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.mcp.conftest import mcp_config
from tests.support.mcp_servers import faults
from vikingbot.agent.loop import BuiltinLoop
from vikingbot.clock import FakeClock
from vikingbot.mcp.client import start_backoff_s
from vikingbot.mcp.hub import McpHub
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey
from vikingbot.store.db import StateStore
from vikingbot.testing.fake_openai import FakeOpenAI, reply

STUCK = {"command": sys.executable, "args": ["-c", "import time; time.sleep(3600)"]}


async def main(turns: int, wait: float) -> None:
    with FakeOpenAI.start() as fake, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fake.script([reply(f"answer {n}") for n in range(turns)])
        config = mcp_config(fake.base_url, {"ok": faults(), "stuck": STUCK})
        store = StateStore.open(f"sqlite:///{root / 'state.db'}")
        hub = McpHub(config, environ={"PATH": "/usr/bin:/bin"}, logs=root, turn_wait_s=wait)
        sessions = SessionStore(root / "sessions", clock=FakeClock())
        loop = BuiltinLoop(config, sessions=sessions, store=store, mcp=hub)
        (root / "ws").mkdir()
        await hub.call("ok", "ok", {"text": "warm"})  # the working server is up first
        took: list[float] = []
        began_all = time.monotonic()
        try:
            for n in range(turns):
                began = time.monotonic()
                await loop.run_turn(f"turn {n}", SessionKey("cli", "default", "local"),
                                    {"workspace": str(root / "ws")})  # fmt: skip
                took.append(time.monotonic() - began)
        finally:
            await loop.aclose()
            await hub.aclose()
            store.close()
        span = time.monotonic() - began_all
    waited = [t for t in took if t > wait * 0.5]
    print(f"{turns} turns over {span:.1f} s, turn wait {wait:g} s, back-off {start_backoff_s(1):.0f} s "
          f"doubling")  # fmt: skip
    print("turn times (s): " + " ".join(f"{t:.2f}" for t in took))
    others = sorted(t for t in took if t <= wait * 0.5) or [0.0]
    print(f"turns that waited for the stuck server: {len(waited)} of {turns}; "
          f"median of the others {others[len(others) // 2]:.3f} s")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--wait", type=float, default=15.0)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.wait))
