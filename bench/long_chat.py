"""A 300-turn chat through vikingbot and through nanobot, same scripted model (issue 43).

One ``FakeOpenAI`` on loopback answers both bots (their real OpenAI SDKs): a chat
turn gets a short reply; a request that asks for a summary (our compaction, nanobot's
consolidation checkpoint) or a memory pass (our idle pass, nanobot's Dream) is
answered with every ``MARK-<n>`` marker it was given, so a marker survives exactly
as far as each bot carries what it was told. Turns 5, 50 and 150 carry a marker.

- vikingbot (this tree): the built-in loop in-process with every registered tool,
  ``bot.agents.context_window`` = ``--context`` tokens (compaction at 0.6 of it);
  then the idle memory pass on the chat, on a quiet day, and on a day with 50 new
  messages.
- nanobot (nanobot-ai 0.3.5, its own venv, ``bench/peers/nanobot_long_chat.py``):
  ``Nanobot.run`` per turn with ``contextWindowTokens`` = ``--context`` and its own
  consolidation on; then its Dream pass on the chat, on a quiet day, and after 50
  new history entries. The venv is ``~/.cache/vikingbot-bench/nb`` (``--setup``
  makes it) or ``/tmp/nanobot-venv``; without one nanobot's figures are skipped.

Prints per bot: characters of turn 300's request (message text, and tools'
JSON), model calls spent on compaction/memory per 100 turns, which of the markers
of turns 5, 50, 150 are in turn 300's request or come back from one ``recall`` call,
and the memory pass's model calls on a day with 0 and with 50 new messages.

    uv run --all-extras --dev python bench/long_chat.py [--turns 300] [--context 65536] [--setup]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loguru import logger  # noqa: E402

from tests.support.summariser import markers  # noqa: E402
from vikingbot.testing.fake_llm import RecordedRequest, Step, reply  # noqa: E402
from vikingbot.testing.fake_openai import FakeOpenAI  # noqa: E402

MARKED = {5: "MARK-5", 50: "MARK-50", 150: "MARK-150"}
START = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
PEERS = Path.home() / ".cache" / "vikingbot-bench"
FALLBACK_VENV = Path("/tmp/nanobot-venv")


def prompt(n: int) -> str:
    """Turn ``n``'s user message (about 300 characters; a marker on turns 5, 50, 150)."""
    fact = f" Please keep this: my code for item {n} is {MARKED[n]}." if n in MARKED else ""
    filler = " ".join(f"word{(n * 7 + i) % 97}" for i in range(40))
    return f"Turn {n}.{fact} Here is what I did today: {filler}."


def kind(req: RecordedRequest) -> str:
    """What a request asks of the model: chat, summary or memory (either bot's wording)."""
    system, last = req.system, req.last_user_text
    if system.startswith("You condense a conversation") or (
        "Create a compact replacement checkpoint" in last
    ):
        return "summary"
    if system.startswith("You keep the long-term memory") or "You are running Dream" in last:
        return "memory"
    return "chat"


def answer(req: RecordedRequest) -> Step:
    what = kind(req)
    found = " ".join(markers(req.text))
    if what == "summary":
        return reply(f"- facts: {found or 'none'}")
    if what == "memory":
        if req.system.startswith("You keep the long-term memory"):
            return reply(f"=== MEMORY.md\n# Memory\n\n- codes: {found or 'none'}\n")
        return reply(f"Dream done. Codes seen: {found or 'none'}")
    return reply("Noted.")


@dataclass
class Figures:
    name: str
    turn_chars: int = 0
    tools_chars: int = 0
    per_100: float = 0.0
    in_request: list[str] = field(default_factory=list)
    recalled: list[str] = field(default_factory=list)
    pass_chat: int | None = None
    pass_quiet: int | None = None
    pass_50: int | None = None
    budget: int | None = None
    note: str = ""


def request_chars(req: RecordedRequest) -> tuple[int, int]:
    text = sum(len(s) for s in req.text.split("\n"))  # the text, separators not counted
    return text, len(json.dumps(req.body.get("tools") or []))


def count(fake: FakeOpenAI, since: int) -> Counter[str]:
    return Counter(kind(r) for r in fake.requests[since:])


# ------------------------------------------------------------------ vikingbot


async def ours(fake: FakeOpenAI, turns: int, context: int) -> Figures:
    from vikingbot.agent import compact
    from vikingbot.agent.loop import BuiltinLoop
    from vikingbot.bus import MessageBus
    from vikingbot.clock import FakeClock
    from vikingbot.config.schema import Config
    from vikingbot.housekeeping.memory_tool import RecallTool
    from vikingbot.memory.consolidate import consolidate_idle
    from vikingbot.memory.model import provider_call
    from vikingbot.session.store import SessionStore
    from vikingbot.session.types import Message, SessionKey
    from vikingbot.store.db import StateStore
    from vikingbot.tools.base import ToolContext

    fig = Figures("vikingbot (this tree)")
    tmp = Path(tempfile.mkdtemp(prefix="vb-long-"))
    clock = FakeClock(START)
    config = Config.model_validate(
        {
            "bot": {
                "agents": {"provider": "openai", "model": "fake-model", "contextWindow": context},
                "providers": {"openai": {"apiBase": fake.base_url, "apiKey": "sk-test"}},
                "memory": {"consolidateAfterIdle": "6h"},
            }
        }
    )
    fig.budget = compact.budget_chars(context, config.bot.agents.compact_at)
    sessions = SessionStore(tmp / "sessions", clock)
    store = StateStore.open(f"sqlite:///{tmp / 'state.db'}")
    workspace = tmp / "workspace"
    workspace.mkdir()
    key = SessionKey("cli", "default", "bench")

    async def yes(name: str, args: dict[str, Any]) -> bool:
        return True

    loop = BuiltinLoop(
        config, sessions=sessions, store=store, clock=clock, bus=MessageBus(), approval_callback=yes
    )
    start = len(fake.requests)
    try:
        for n in range(1, turns + 1):
            clock.advance(seconds=60)
            result = await loop.run_turn(prompt(n), key, {"workspace": str(workspace)})
            if result.ended != "final":
                raise RuntimeError(f"turn {n} ended {result.ended}: {result.error}")
    finally:
        await loop.aclose()
    spent = count(fake, start)
    fig.per_100 = (spent["summary"] + spent["memory"]) * 100 / turns
    last = [r for r in fake.requests[start:] if kind(r) == "chat"][-1]
    fig.turn_chars, fig.tools_chars = request_chars(last)
    fig.in_request = [m for m in MARKED.values() if m in markers(last.text)]
    ctx = ToolContext(workspace, key, config, store=store, sessions=sessions)
    for m in MARKED.values():
        if m not in fig.in_request and m in await RecallTool().run({"query": m}, ctx):
            fig.recalled.append(m)

    complete = provider_call(lambda: config, {})

    async def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def memory_pass() -> int:
        before = len(fake.requests)
        await consolidate_idle(
            sessions,
            lambda _k: workspace,
            complete,
            now=clock.now(),
            idle_after=timedelta(hours=6),
            cap=config.bot.memory.max_chars,
            run=run,
        )
        return count(fake, before)["memory"]

    clock.advance(hours=7)
    fig.pass_chat = await memory_pass()
    clock.advance(days=1)
    fig.pass_quiet = await memory_pass()
    clock.advance(days=1)
    for i in range(25):
        sessions.append(
            key,
            Message("user", f"new fact {i} MARK-{1000 + i}", clock.now()),
            Message("assistant", "Noted.", clock.now()),
        )
    clock.advance(hours=7)
    fig.pass_50 = await memory_pass()
    store.close()
    return fig


# ------------------------------------------------------------------ nanobot


def nanobot_python() -> Path | None:
    for venv in (PEERS / "nb", FALLBACK_VENV):
        if (venv / "bin" / "python").exists():
            return venv / "bin" / "python"
    return None


def setup() -> None:
    """Make nanobot's venv (uv, from PyPI); never our dependency."""
    if (PEERS / "nb" / "bin" / "python").exists():
        return
    PEERS.mkdir(parents=True, exist_ok=True)
    subprocess.run(["uv", "venv", "-q", str(PEERS / "nb"), "--python", "3.11"], check=True)
    py = str(PEERS / "nb" / "bin" / "python")
    subprocess.run(["uv", "pip", "install", "-q", "-p", py, "nanobot-ai==0.3.5"], check=True)


def nanobot(fake: FakeOpenAI, turns: int, context: int, python: Path) -> Figures:
    fig = Figures("nanobot 0.3.5")
    home = Path(tempfile.mkdtemp(prefix="nb-long-"))
    proc = subprocess.Popen(
        [
            str(python),
            str(ROOT / "bench/peers/nanobot_long_chat.py"),
            str(home),
            fake.base_url,
            str(turns),
            str(context),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    marks: dict[str, int] = {}

    def until(prefix: str) -> str:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(prefix):
                return line.strip()
        raise RuntimeError(f"nanobot exited before {prefix!r} (code {proc.wait()})")

    def go(name: str) -> None:
        until(f"@@ phase {name}")
        marks[name] = len(fake.requests)
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()

    try:
        go("chat")
        for n in range(1, turns + 1):
            proc.stdin.write(prompt(n) + "\n")
            proc.stdin.flush()
            until(f"@@ turn {n} ")
        go("dream-after-chat")
        go("dream-quiet-day")
        go("dream-50-new")
        go("done")
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    chat = fake.requests[marks["chat"] : marks["dream-after-chat"]]
    spent = Counter(kind(r) for r in chat)
    fig.per_100 = (spent["summary"] + spent["memory"]) * 100 / turns
    last = [r for r in chat if kind(r) == "chat"][-1]
    fig.turn_chars, fig.tools_chars = request_chars(last)
    fig.in_request = [m for m in MARKED.values() if m in markers(last.text)]
    fig.note = (
        "recall: nanobot has no recall tool; its Dream edits memory files through tool "
        "calls, which this scripted model does not make (its pass is counted, not its edits)"
    )

    def between(a: str, b: str) -> int:
        return sum(1 for r in fake.requests[marks[a] : marks[b]] if kind(r) == "memory")

    fig.pass_chat = between("dream-after-chat", "dream-quiet-day")
    fig.pass_quiet = between("dream-quiet-day", "dream-50-new")
    fig.pass_50 = between("dream-50-new", "done")
    return fig


# ------------------------------------------------------------------ report


def show(f: Figures, turns: int) -> None:
    budget = f" (budget {f.budget:,})" if f.budget else ""
    kept = f.in_request + [f"{m} (recall)" for m in f.recalled]
    print(f"{f.name}")
    print(
        f"  turn {turns} request: {f.turn_chars:,} chars of text{budget} + {f.tools_chars:,} of tools"
    )
    print(f"  compaction/memory model calls per 100 turns: {f.per_100:.1f}")
    print(f"  markers 5/50/150 at turn {turns}: {len(kept)}/3  {', '.join(kept) or '-'}")
    print(
        f"  memory pass model calls: after the chat {f.pass_chat}, quiet day {f.pass_quiet}, "
        f"day with 50 new messages {f.pass_50}"
    )
    if f.note:
        print(f"  {f.note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--quick", action="store_true", help="100 turns")
    ap.add_argument("--context", type=int, default=65536, help="model window, tokens")
    ap.add_argument("--setup", action="store_true", help="make nanobot's venv first")
    ap.add_argument("--only-ours", action="store_true")
    args = ap.parse_args()
    logger.remove()
    if args.quick:
        args.turns = 100
    if args.setup:
        setup()
    with FakeOpenAI.start() as fake:
        fake.responder = answer
        show(asyncio.run(ours(fake, args.turns, args.context)), args.turns)
        python = nanobot_python()
        if args.only_ours:
            return
        if python is None:
            print("nanobot 0.3.5: skipped, no venv (run with --setup)")
            return
        try:
            show(nanobot(fake, args.turns, args.context, python), args.turns)
        except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
            print(f"nanobot 0.3.5: not measured: {exc}")


if __name__ == "__main__":
    main()
