"""What the acp loop costs: per-turn overhead, cold start, and the files a new loop takes.

    uv run --all-extras --dev python bench/acp_overhead.py [--turns 200] [--starts 5]

1. Overhead per turn (process already started): the median wall time of
   ``AcpLoop.run_turn`` against the scripted ACP agent answering at once (a
   two-chunk reply), beside a bare SDK client sending the same prompts to the
   same agent in the same run (the agent's own time plus JSON-RPC). The
   difference is the loop's own cost: session store read and write, the turn
   lock, history, routing of updates (target: under 10 ms).
   The session store's own append (fsync'd, the same two messages) is timed
   alone in the same run, so the loop's share can be told from the disk's.
2. Cold start to first reply: a fresh loop's first turn (spawn the agent,
   ``initialize``, ``session/new``, prompt), median of ``--starts``.
3. Files changed to add a new loop: counted from ``examples/vikingbot-loop-example``
   (target 2: the module and its entry point), with a check that vikingbot
   itself names the example nowhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = {"*": [{"text": "Hello, "}, {"text": "Astrid."}]}


def agent_argv(script: Path) -> list[str]:
    return [sys.executable, "-m", "vikingbot.testing.fake_acp_agent", str(script)]


def make_loop(tmp: Path, script: Path) -> Any:
    from vikingbot.agent.acp_loop import AcpLoop
    from vikingbot.config.schema import Config
    from vikingbot.session.store import SessionStore

    argv = agent_argv(script)
    config = Config.model_validate(
        {"bot": {"agents": {"loop": "acp", "acp": {"command": argv[0], "args": argv[1:]}}}}
    )
    return AcpLoop(config, sessions=SessionStore(tmp / "sessions"))


class Collector:
    """A bare ACP client: keeps reply chunks, nothing else."""

    def __init__(self) -> None:
        self.text: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        content = getattr(update, "content", None)
        if content is not None and hasattr(content, "text"):
            self.text.append(content.text)

    def on_connect(self, conn: Any) -> None:
        return None


async def bare_turns(script: Path, workspace: Path, turns: int) -> list[float]:
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

    argv = agent_argv(script)
    client = Collector()
    out: list[float] = []
    async with spawn_agent_process(client, argv[0], *argv[1:]) as (conn, _proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        for i in range(turns + 5):
            client.text.clear()
            t0 = time.perf_counter()
            await conn.prompt(session_id=sid, prompt=[text_block("(time)"), text_block(f"q{i}")])
            if i >= 5:  # warm-up
                out.append(time.perf_counter() - t0)
    return out


async def loop_turns(tmp: Path, script: Path, workspace: Path, turns: int) -> list[float]:
    from vikingbot.session.types import SessionKey

    loop = make_loop(tmp, script)
    key = SessionKey("telegram", "default", "42")
    out: list[float] = []
    try:
        await loop.start()
        for i in range(turns + 5):
            t0 = time.perf_counter()
            result = await loop.run_turn(f"q{i}", key, {"workspace": str(workspace)})
            if i >= 5:
                out.append(time.perf_counter() - t0)
            assert result.text == "Hello, Astrid.", result
    finally:
        await loop.aclose()
    return out


def session_appends(tmp: Path, turns: int) -> list[float]:
    """The session store's own cost per turn: one fsync'd append of a prompt and a reply."""
    from datetime import UTC, datetime

    from vikingbot.session.store import SessionStore
    from vikingbot.session.types import Message, SessionKey

    store = SessionStore(tmp / "append-only")
    key = SessionKey("telegram", "default", "43")
    store.get_or_create(key)
    out: list[float] = []
    for i in range(turns):
        now = datetime.now(UTC)
        t0 = time.perf_counter()
        store.append(
            key, Message("user", f"q{i}", now), Message("assistant", "Hello, Astrid.", now)
        )
        out.append(time.perf_counter() - t0)
    return out


async def cold_start(tmp: Path, script: Path, workspace: Path) -> float:
    from vikingbot.session.types import SessionKey

    loop = make_loop(tmp, script)
    t0 = time.perf_counter()
    try:
        result = await loop.run_turn(
            "hi", SessionKey("cli", "default", "local"), {"workspace": str(workspace)}
        )
    finally:
        elapsed = time.perf_counter() - t0
        await loop.aclose()
    assert result.text == "Hello, Astrid.", result
    return elapsed


def files_for_a_loop() -> tuple[int, list[str], list[str]]:
    example = ROOT / "examples" / "vikingbot-loop-example"
    files = sorted(p.relative_to(example).as_posix() for p in example.rglob("*") if p.is_file())
    mentions = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "vikingbot").rglob("*.py")
        if "vikingbot_loop_example" in p.read_text() or "EchoLoop" in p.read_text()
    ]
    return len(files), files, mentions


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--starts", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        script = tmp / "script.json"
        script.write_text(json.dumps(SCRIPT))
        workspace = tmp / "ws"
        workspace.mkdir()
        bare = await bare_turns(script, workspace, args.turns)
        loop = await loop_turns(tmp, script, workspace, args.turns)
        appends = session_appends(tmp, args.turns)
        starts = [await cold_start(tmp / f"c{i}", script, workspace) for i in range(args.starts)]
    mb, ml = statistics.median(bare) * 1000, statistics.median(loop) * 1000
    print(f"acp turn, bare SDK client (agent's own time): median {mb:.2f} ms over {len(bare)}")
    print(f"acp turn, AcpLoop.run_turn:                   median {ml:.2f} ms over {len(loop)}")
    ma = statistics.median(appends) * 1000
    print(f"session store append (2 messages, fsync'd): median {ma:.2f} ms over {len(appends)}")
    print(
        f"acp loop overhead per turn: {ml - mb:.2f} ms, of which the session write ~{ma:.2f} ms "
        f"(target < 10 ms)"
    )
    print(
        f"cold start to first reply: median {statistics.median(starts):.2f} s over "
        f"{len(starts)} (min {min(starts):.2f} s, max {max(starts):.2f} s)"
    )
    n, files, mentions = files_for_a_loop()
    print(
        f"files to add a new loop: {n} ({', '.join(files)}); "
        f"vikingbot files naming it: {len(mentions)} (target 2 and 0)"
    )


if __name__ == "__main__":
    asyncio.run(main())
