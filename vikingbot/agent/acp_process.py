"""One ACP agent process: started through ``vikingbot.proc``, spoken to with the official SDK.

``AgentProcess.ensure()`` starts the program (``bot.agents.acp.command`` +
``args``, ``env`` with ``${VAR}``) in its own process group, wires its stdio to
an ``acp`` ``ClientSideConnection`` through ``LineTransport`` and sends
``initialize``, all within ``startup_timeout_s``; an agent that cannot be
started raises ``ProviderUnavailable`` (an outage, as a model API that cannot be
reached: the heartbeat reports provider-down). When the process dies the
next turn starts a fresh one, after a backoff that doubles with each death in
a row (0 s, 1 s, 2 s ... 30 s) and resets after a turn that worked.

``LineTransport`` is the JSON-RPC framing (one JSON object a line), total on
any input: a line that is not a JSON object is counted and a sample kept, a
line longer than the cap is dropped and counted, so that an agent writing
garbage is reported as such ("wrote 3 lines that are not JSON-RPC, e.g. ...")
instead of hanging silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot import __version__, proc
from vikingbot.errors import NotConfiguredError, ProviderUnavailable, SpawnError

if TYPE_CHECKING:
    from acp.client.connection import ClientSideConnection

    from vikingbot.config.schema import AcpConfig

MAX_LINE = 16 * 1024 * 1024  # one JSON-RPC message (a file read can be big)
STDERR_KEEP = 16384
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(values: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``${VAR}`` in each value from ``environ``; a missing variable is a ``NotConfiguredError``."""
    out: dict[str, str] = {}
    for key, value in values.items():
        missing = [m for m in _VAR.findall(value) if m not in environ]
        if missing:
            raise NotConfiguredError(
                f"bot.agents.acp.env.{key} uses ${{{missing[0]}}}, which is not set "
                "(set it in the environment or the home's .env)"
            )
        out[key] = _VAR.sub(lambda m: environ[m.group(1)], value)
    return out


@dataclass
class Garbage:
    """What the agent wrote that was not JSON-RPC."""

    lines: int = 0
    oversized: int = 0
    sample: str = ""
    seen: asyncio.Event = field(default_factory=asyncio.Event)  # set at the first bad line

    def note(self) -> str:
        parts = []
        if self.lines:
            parts.append(f"wrote {self.lines} line(s) that are not JSON-RPC, e.g. {self.sample!r}")
        if self.oversized:
            parts.append(f"wrote {self.oversized} message(s) over {MAX_LINE} bytes (dropped)")
        return "; ".join(parts)


class LineTransport:
    """Newline-delimited JSON-RPC over a child's pipes (the ``acp`` Transport protocol)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.garbage = Garbage()

    async def send(self, message: dict[str, Any]) -> None:
        self._writer.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")
        await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line.strip():
                    return None
            except asyncio.LimitOverrunError:
                await self._skip_line()
                self.garbage.oversized += 1
                self.garbage.seen.set()
                continue
            except (ConnectionError, OSError):
                return None
            text = line.strip()
            if not text:
                continue
            try:
                message = json.loads(text)
            except (ValueError, RecursionError):
                message = None
            if isinstance(message, dict) and message.get("jsonrpc") == "2.0":
                return message
            self.garbage.lines += 1
            if not self.garbage.sample:
                self.garbage.sample = text[:120].decode("utf-8", "replace")
            self.garbage.seen.set()

    async def _skip_line(self) -> None:
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                return

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()


@dataclass
class AgentProcess:
    """The agent program, its connection and what it said about itself."""

    config: AcpConfig
    environ: Mapping[str, str]
    client: Any  # the acp Client implementation (agent.acp_client.AcpClient)
    conn: ClientSideConnection | None = None
    child: asyncio.subprocess.Process | None = None
    transport: LineTransport | None = None
    load_session: bool = False
    mcp_transports: frozenset[str] = frozenset({"stdio"})  # what session/new may carry
    takes_images: bool = False  # promptCapabilities.image: image blocks may be sent
    deaths: int = 0
    died_at: float = 0.0
    last_death: str = ""
    _stderr: deque[bytes] = field(default_factory=lambda: deque(maxlen=64))
    _tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    generation: int = 0  # bumped at each start: ACP session ids do not survive a restart
    retired: bool = False  # the config changed: the next turn stops this process first

    @property
    def name(self) -> str:
        return Path(self.config.command or "?").name

    @property
    def alive(self) -> bool:
        return self.child is not None and self.child.returncode is None and self.conn is not None

    def backoff_s(self) -> float:
        return 0.0 if self.deaths <= 1 else min(30.0, 2.0 ** (self.deaths - 2))

    def stderr_tail(self, chars: int = 500) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace").strip()[-chars:]

    def why(self) -> str:
        """What the agent did, for an error message: exit status, garbage, stderr."""
        bits = []
        if self.child is not None and self.child.returncode is not None:
            bits.append(f"exited with status {self.child.returncode}")
        if self.transport is not None and self.transport.garbage.note():
            bits.append(self.transport.garbage.note())
        tail = self.stderr_tail()
        if tail:
            bits.append(f"stderr: {tail}")
        return "; ".join(bits) or "no output"

    async def ensure(self, cwd: Path) -> ClientSideConnection:
        """A live, initialized connection (starting the process if needed)."""
        async with self._lock:
            if self.alive and not self.retired:
                assert self.conn is not None
                return self.conn
            self.retired = False
            await self.stop()
            wait = self.backoff_s() - (time.monotonic() - self.died_at)
            if wait > 0:
                logger.info(
                    "acp: agent {} died {} time(s); restarting in {:.1f}s",
                    self.name,
                    self.deaths,
                    wait,
                )
                await asyncio.sleep(wait)
            return await self._start(cwd)

    async def _start(self, cwd: Path) -> ClientSideConnection:
        from acp import PROTOCOL_VERSION, connect_to_agent
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        cfg = self.config
        if not cfg.command:
            raise NotConfiguredError(NO_COMMAND)
        env = {**self.environ, **expand_env(cfg.env, self.environ)}
        where = Path(os.path.expanduser(cfg.cwd)) if cfg.cwd else cwd
        try:
            self.child = await proc.start(
                [os.path.expanduser(cfg.command), *cfg.args], cwd=where, env=env, limit=MAX_LINE
            )
        except SpawnError as exc:
            self._died(str(exc))
            raise ProviderUnavailable(
                f"the ACP agent {self.name!r} could not be started: {exc}; "
                "check bot.agents.acp.command"
            ) from exc
        self.generation += 1
        assert self.child.stdout is not None and self.child.stdin is not None
        self.transport = LineTransport(self.child.stdout, self.child.stdin)
        self._stderr.clear()
        if self.child.stderr is not None:
            self._tasks.append(asyncio.create_task(self._drain(self.child.stderr)))
        self.conn = connect_to_agent(self.client, self.transport)
        caps = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False
        )
        try:
            async with asyncio.timeout(cfg.startup_timeout_s):
                init = await self.conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=caps,
                    client_info=Implementation(name="vikingbot", version=__version__),
                )
        except TimeoutError:
            why = self.why()
            await self.stop()
            self._died(f"no answer to initialize within {cfg.startup_timeout_s:g}s")
            raise ProviderUnavailable(
                f"the ACP agent {self.name!r} did not answer initialize within "
                f"{cfg.startup_timeout_s:g}s ({why}); is bot.agents.acp.command an ACP agent?"
            ) from None
        except asyncio.CancelledError:  # the turn ended while starting: do not keep a half-start
            await self.stop(grace_s=0.5)
            raise
        except Exception as exc:  # the connection closed: the process exited or broke the pipe
            await self._settle()
            why = self.why()
            await self.stop()
            self._died(why)
            raise ProviderUnavailable(
                f"the ACP agent {self.name!r} failed to start ({why})"
            ) from exc
        caps_in = init.agent_capabilities
        self.load_session = bool(caps_in and caps_in.load_session)
        prompt_caps = caps_in.prompt_capabilities if caps_in else None
        self.takes_images = bool(prompt_caps is not None and prompt_caps.image)
        mcp_caps = caps_in.mcp_capabilities if caps_in else None
        self.mcp_transports = frozenset(
            {"stdio"}
            | ({"streamableHttp"} if mcp_caps is not None and mcp_caps.http else set())
            | ({"sse"} if mcp_caps is not None and mcp_caps.sse else set())
        )
        logger.info(
            "acp: agent {} started (pid {}, protocol {}, session/load {})",
            self.name,
            self.child.pid,
            init.protocol_version,
            self.load_session,
        )
        return self.conn

    def _died(self, why: str) -> None:
        self.deaths += 1
        self.died_at = time.monotonic()
        self.last_death = why

    def worked(self) -> None:
        """A turn completed: the next death restarts at once."""
        self.deaths = 0

    async def _settle(self) -> None:
        """Give a dying child a moment to exit and its last stderr to arrive."""
        with contextlib.suppress(TimeoutError):
            if self.child is not None:
                await asyncio.wait_for(proc.exited(self.child), 1.0)
            if self._tasks:
                await asyncio.wait_for(asyncio.wait(self._tasks), 1.0)

    async def crashed(self) -> str:
        """The connection broke mid-turn: note why, stop what is left, say why."""
        await self._settle()
        why = self.why()
        await self.stop()
        self._died(why)
        return why

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        with contextlib.suppress(Exception):
            while chunk := await stream.read(4096):
                self._stderr.append(chunk)
                while sum(len(c) for c in self._stderr) > STDERR_KEEP and len(self._stderr) > 1:
                    self._stderr.popleft()

    async def stop(self, grace_s: float = 2.0) -> None:
        conn, self.conn = self.conn, None
        child, self.child = self.child, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        if child is not None:
            await proc.stop(child, grace_s)
            # keep the exit status for why()
            self.child = child if child.returncode is not None else None
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()

    async def kill(self, why: str = "killed: it did not stop after session/cancel") -> None:
        """Kill at once (a turn that did not stop when cancelled, or broke the protocol)."""
        if self.child is not None:
            proc.kill_group(self.child)
        await self.stop(grace_s=0.5)
        self._died(why)


NO_COMMAND = (
    "the acp loop has no agent program: set bot.agents.acp.command (and args), e.g. "
    "vikingbot config set bot.agents.acp.command npx; vikingbot config set bot.agents.acp.args "
    "'[\"@zed-industries/claude-agent-acp\"]' (recipes: docs/agents.md)"
)
