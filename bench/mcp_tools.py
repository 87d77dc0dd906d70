"""MCP servers as tools (issue 33): what they cost a turn, a start, a heartbeat.

Parts (``--parts overhead,cold,children,gateway,chars``), all against real servers we did
not write, installed by ``.ci/run`` (``~/.cache/vikingbot/mcp-servers``):

- ``overhead``: server-everything's ``echo`` over stdio called through the built-in
  loop (an unattended turn: approval, the audit row in SQLite, the tool, the cap),
  per call from the model's tool call to the loop's next model call; beside the
  same server called with the bare SDK (``mcp.Client`` with the SDK's own stdio
  transport), alternating turn by turn. Median of 200 each; target: the loop's
  median under 2 ms beyond the bare SDK's.
- ``cold``: a fresh hub from nothing to the tool list, ``npx -y
  @modelcontextprotocol/server-everything stdio`` and ``uvx mcp-server-time`` (both
  from the tools' caches after a first run; report).
- ``children``: the processes under this process after 1 and after 1,000 heartbeat
  turns (unattended, each calling ``mcp_time_get_current_time``) through one loop
  and hub, as a gateway holds them (target: the same count), and the server starts.
- ``gateway``: the same count for a real ``vikingbot gateway`` process (the fake
  OpenAI server on loopback, the model calling ``mcp_time_get_current_time`` in every
  turn): processes under the gateway after 1 and after ``--cycles`` chat turns through
  its control API (target: the same count), and the server starts ``/health`` reports.
- ``chars``: input characters (messages and tool schemas as JSON) of a heartbeat
  turn that needs no MCP tool: no servers; three servers whose tools are safe for
  unattended turns; the same three with ``bot.heartbeat.mcp_servers: []`` (target:
  identical to none); three servers with nothing approved (report).

    uv run --all-extras --dev python bench/mcp_tools.py [--calls 200] [--cycles 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.clock import SystemClock
from vikingbot.config.schema import Config
from vikingbot.mcp.hub import McpHub
from vikingbot.providers.base import ChatRequest, ProviderResponse, ToolCall
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey
from vikingbot.store.db import StateStore
from vikingbot.tools.base import Tool

MCP_DIR = Path.home() / ".cache" / "vikingbot" / "mcp-servers"
EVERYTHING = MCP_DIR / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
TIME = MCP_DIR / "time" / "bin" / "mcp-server-time"
FAULTS = Path(__file__).parent.parent / "tests" / "support" / "mcp_faults.py"
UNATTENDED = {"heartbeat": True, "unattended": True}


class Scripted:
    """An in-process provider: ``calls`` tool calls (one per model call), then a reply;
    it notes when it handed out a call and when the loop came back, and what it was sent."""

    name = "scripted"

    def __init__(self, tool: str | list[str], args: dict[str, Any], calls: int) -> None:
        self.tools = [tool] if isinstance(tool, str) else tool
        self.args, self.calls = args, calls
        self.handed: tuple[str, float] | None = None
        self.gaps: list[tuple[str, float]] = []
        self.sent_chars: list[int] = []
        self.n = 0

    async def complete(self, request: ChatRequest) -> ProviderResponse:
        now = time.perf_counter()
        if self.handed is not None:
            self.gaps.append((self.handed[0], now - self.handed[1]))
            self.handed = None
        done = 0
        for m in reversed(request.messages):
            if m.role == "user":
                break
            done += m.role == "tool"
        if done == 0:
            body = [(m.role, m.content) for m in request.messages]
            tools = [(t.name, t.description, t.parameters) for t in request.tools or []]
            self.sent_chars.append(len(json.dumps(body)) + len(json.dumps(tools)))
        if done < self.calls:
            self.n += 1
            tool = self.tools[done % len(self.tools)]
            self.handed = (tool, time.perf_counter())
            return ProviderResponse("", [ToolCall(f"c{self.n}", tool, dict(self.args))])
        return ProviderResponse("HEARTBEAT_OK")

    def cost(self, tokens_in: int, tokens_out: int, **_: Any) -> float:
        return 0.0

    async def aclose(self) -> None:
        return None


def config(servers: dict[str, Any], heartbeat: dict[str, Any] | None = None) -> Config:
    return Config.model_validate(
        {
            "bot": {
                "agents": {"provider": "openai", "model": "m", "maxToolIterations": 100},
                "tools": {"mcpServers": servers},
                "heartbeat": heartbeat or {},
            }
        }
    )


def make_loop(
    root: Path,
    cfg: Config,
    provider: Scripted,
    store: Any = None,
    tools: dict[str, Tool] | None = None,
) -> BuiltinLoop:
    hub = McpHub(
        cfg, environ=dict(os.environ), logs=root / "logs", pins=root / "pins.json", turn_wait_s=120
    )
    sessions = SessionStore(root / "sessions", clock=SystemClock())
    loop = BuiltinLoop(cfg, sessions=sessions, provider=provider, mcp=hub, store=store)  # type: ignore[arg-type]
    if tools:
        loop._tools = {**loop.tools, **tools}
    return loop


class BareEcho(Tool):
    """server-everything's echo through a bare SDK client, as a tool of the same loop: the
    same scheduling as the MCP tool, so its SDK time is the server's own time there."""

    name = "bare_echo"
    read_only = True
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"message": {"type": "string"}},
    }

    def __init__(self, client: Any) -> None:
        self.client = client
        self.times: list[float] = []

    async def run(self, args: dict[str, Any], ctx: Any) -> str:
        began = time.perf_counter()
        out = await self.client.call_tool("echo", args)
        self.times.append(time.perf_counter() - began)
        return str(out.content[0].text)


async def overhead(root: Path, calls: int) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    per_turn = 10
    args = {"message": "hello"}
    cfg = config(
        {"every": {"command": str(EVERYTHING), "args": ["stdio"]}},
        {"safeTools": ["mcp_every_*", "bare_echo"]},
    )
    provider = Scripted(["mcp_every_echo", "bare_echo"], args, 2 * per_turn)
    store = StateStore.open(f"sqlite:///{root / 'state.db'}")
    ws = root / "ws"
    ws.mkdir()
    meta = {**UNATTENDED, "workspace": str(ws)}
    params = StdioServerParameters(command=str(EVERYTHING), args=["stdio"])
    async with Client(params, cache=None) as client:
        bare = BareEcho(client)
        loop = make_loop(root, cfg, provider, store, tools={"bare_echo": bare})
        await loop.run_turn("warm up", SessionKey("b", "d", "w"), meta)
        provider.gaps.clear()
        bare.times.clear()
        for i in range(max(1, calls // per_turn)):
            result = await loop.run_turn("echo", SessionKey("b", "d", f"s{i}"), meta)
            texts = [c.result for c in result.tool_calls]
            assert texts == ["Echo: hello"] * 2 * per_turn, texts
    audit: list[float] = []  # what the audit row alone costs on this disk
    for _ in range(calls):
        began = time.perf_counter()
        store.audit("heartbeat", "tool.approve", "mcp_every_echo", "approved", "bench")
        audit.append(time.perf_counter() - began)
    assert loop.mcp is not None
    await loop.mcp.aclose()
    store.close()
    mcp_gaps = [g for name, g in provider.gaps if name == "mcp_every_echo"]
    bare_gaps = [g for name, g in provider.gaps if name == "bare_echo"]
    looped = statistics.median(mcp_gaps) * 1000
    sdk = statistics.median(bare.times) * 1000
    print(
        f"overhead: server-everything echo over stdio, {len(mcp_gaps)} calls each, alternating in one loop"
    )
    print(
        f"  mcp_every_echo through the loop (approval, audit row, hub, transport, cap): median {looped:.3f} ms/call"
    )
    print(
        f"  the server's own time: the same echo by a bare SDK client (mcp.Client, SDK stdio) inside the same loop: median {sdk:.3f} ms"
    )
    print(
        f"  for scale: that bare tool's whole call through the loop: median {statistics.median(bare_gaps) * 1000:.3f} ms; one audit row alone: median {statistics.median(audit) * 1000:.3f} ms"
    )
    verdict = "met" if looped - sdk < 2 else "MISSED"
    print(f"  loop beyond the server's own time: {looped - sdk:+.3f} ms (target < 2 ms: {verdict})")


async def cold(root: Path, runs: int) -> None:
    print(f"cold start to tool list (fresh hub each time; median of {runs})")
    for label, entry in (
        (
            "npx server-everything",
            {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything", "stdio"]},
        ),
        ("uvx mcp-server-time", {"command": "uvx", "args": ["mcp-server-time"]}),
    ):
        times: list[float] = []
        count = 0
        for _ in range(runs + 1):  # the first run fills the tool's cache; not counted
            hub = McpHub(config({"s": entry}), environ=dict(os.environ))
            began = time.perf_counter()
            listing = await hub._conn("s").ensure()
            times.append(time.perf_counter() - began)
            count = len(listing)
            await hub.aclose()
        print(
            f"  {label:24} {statistics.median(times[1:]):6.2f} s ({count} tools; first run {times[0]:.2f} s)"
        )


def descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        kids = [p for p, pp in parents.items() if pp in frontier]
        found += kids
        frontier = kids
    return found


async def children(root: Path, cycles: int) -> None:
    cfg = config({"time": {"command": str(TIME)}}, {"safeTools": ["mcp_time_*"]})
    provider = Scripted("mcp_time_get_current_time", {"timezone": "UTC"}, 1)
    loop = make_loop(root, cfg, provider)
    ws = root / "ws-children"
    ws.mkdir()
    meta = {**UNATTENDED, "workspace": str(ws)}
    counts = {}
    for i in range(1, cycles + 1):
        result = await loop.run_turn("tick", SessionKey("hb", "d", "heartbeat"), meta)
        assert result.tool_calls and result.tool_calls[0].approved, result.tool_calls
        if i in (1, cycles):
            counts[i] = len(descendants(os.getpid()))
    assert loop.mcp is not None
    (status,) = loop.mcp.status()
    await loop.mcp.aclose()
    after = len(descendants(os.getpid()))
    same = "met" if counts[1] == counts[cycles] else "MISSED"
    print("children: heartbeat turns calling mcp_time_get_current_time through one loop and hub")
    print(
        f"  processes under this one after 1 turn: {counts[1]}, after {cycles}: {counts[cycles]} (target: the same: {same})"
    )
    print(f"  server starts: {status.starts}; after the hub stopped: {after} processes")


def gateway_children(root: Path, turns: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
    from tests.support.gateway_proc import GatewayProcess
    from vikingbot.gateway.client import GatewayClient
    from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

    timed = []  # tool results that hold the server's answer (a refused call would not)

    def answer(request: Any) -> Any:
        last = request.messages[-1] if request.messages else {}
        if last.get("role") == "tool":
            timed.append('"datetime"' in str(last.get("content")))
            return reply("It is noon.")
        return tool_call("mcp_time_get_current_time", {"timezone": "UTC"})

    home = root / "gw-home"
    with FakeOpenAI.start() as fake:
        fake.responder = answer
        bot = {
            "agents": {"provider": "openai", "model": "fake-model"},
            "providers": {"openai": {"api_base": fake.base_url, "api_key": "sk-bench"}},
            "tools": {
                "mcpServers": {"time": {"command": str(TIME)}},
                "autoApprove": ["mcp_time_*"],
            },
            "heartbeat": {"enabled": False},
        }
        home.mkdir()
        (home / "config.json").write_text(json.dumps({"bot": bot}))
        with GatewayProcess(home, fork=False) as gw:
            assert gw.proc is not None
            client = GatewayClient.find(home)
            assert client is not None
            counts, t0 = {}, time.perf_counter()
            for i in range(1, turns + 1):
                out = client.post("/api/v1/chat", {"text": f"time? {i}"}, timeout=60)
                assert out.get("reply") == "It is noon.", out
                if i in (1, turns):
                    counts[i] = len(descendants(gw.proc.pid))
            took = time.perf_counter() - t0
            (status,) = gw.get("/health")["mcp"]
    same = "met" if counts[1] == counts[turns] else "MISSED"
    print("gateway: chat turns through a real gateway, each calling mcp_time_get_current_time")
    print(
        f"  processes under the gateway after 1 turn: {counts[1]}, after {turns}: {counts[turns]} "
        f"(target: the same: {same}); server starts: {status['starts']}; "
        f"{turns} turns in {took:.1f} s; model requests {len(fake.requests)}; "
        f"tool results with the server's time: {sum(timed)} of {len(timed)}"
    )


async def chars(root: Path) -> None:
    three = {
        "time": {"command": str(TIME)},
        "every": {"command": str(EVERYTHING), "args": ["stdio"]},
        "faults": {"command": sys.executable, "args": [str(FAULTS)]},
    }
    safe = {
        "safeTools": [
            "read_file",
            "list_dir",
            "glob",
            "grep",
            "message",
            "mcp_time_*",
            "mcp_every_*",
            "mcp_faults_*",
        ]
    }
    plain = {"safeTools": ["read_file", "list_dir", "glob", "grep", "message"]}
    cases = [
        ("no MCP servers", config({}, plain)),
        ("three servers, their tools safe unattended", config(three, safe)),
        ("three servers, heartbeat.mcp_servers: []", config(three, {**safe, "mcpServers": []})),
        ("three servers, nothing approved", config(three, plain)),
    ]
    print(
        "chars: input characters of a heartbeat turn that needs no MCP tool (messages + tool schemas)"
    )
    base = None
    for label, cfg in cases:
        provider = Scripted("none", {}, 0)
        loop = make_loop(root / label.replace(" ", "_").replace(":", ""), cfg, provider)
        ws = root / f"ws-{len(label)}-{id(cfg)}"
        ws.mkdir()
        await loop.run_turn(
            "tick", SessionKey("hb", "d", "heartbeat"), {**UNATTENDED, "workspace": str(ws)}
        )
        assert loop.mcp is not None
        started = sum(s.starts for s in loop.mcp.status())
        await loop.mcp.aclose()
        n = provider.sent_chars[0]
        base = n if base is None else base
        print(f"  {label:44} {n:7,} chars ({n - base:+,} against none; servers started: {started})")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--cold-runs", type=int, default=3)
    parser.add_argument("--parts", default="overhead,cold,children,gateway,chars")
    args = parser.parse_args()
    for need in (EVERYTHING, TIME):
        if not need.exists():
            raise SystemExit(f"{need} is missing: run .ci/run (it installs the MCP servers)")
    from vikingbot.logs import quiet

    quiet()
    parts = args.parts.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "overhead" in parts:
            await overhead(root, args.calls)
        if "cold" in parts:
            await cold(root, args.cold_runs)
        if "children" in parts:
            await children(root, args.cycles)
        if "gateway" in parts:
            gateway_children(root, args.cycles)
        if "chars" in parts:
            await chars(root)


if __name__ == "__main__":
    asyncio.run(main())
