"""The MCP servers of one gateway (or one CLI run): one session per server, shared by turns.

``tools_for`` gives a turn the tools of every enabled server (for an unattended turn
only the servers ``bot.heartbeat.mcp_servers`` names, so the others are not even
started), starting the ones not running. A turn waits at most ``TURN_WAIT_S`` for
starts; a server that cannot start, or is still starting, is left out of that turn
(its start goes on), named in ``status`` / ``problems``, and ``on_problem`` is told
once until the server works again. ``start_eager`` starts the ``eager: true`` ones;
``aclose`` stops them all. A config change stops the servers whose entry changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.errors import McpError
from vikingbot.mcp.client import Connection
from vikingbot.mcp.naming import enabled, name_tools, names_a_tool_of
from vikingbot.mcp.pins import Pins
from vikingbot.mcp.reaper import Running
from vikingbot.mcp.tool import McpTool
from vikingbot.mcp.types import Listed, ServerStatus

if TYPE_CHECKING:
    from vikingbot.config.schema import Config
    from vikingbot.tools.base import Tool

TURN_WAIT_S = 15.0


ProblemSink = Callable[[str, str], None]  # (server, problem) -> tell the owner


class McpHub:
    """The configured MCP servers and their sessions."""

    def __init__(
        self,
        config: Config,
        *,
        environ: Mapping[str, str],
        logs: Path | None = None,
        pins: Path | None = None,
        on_problem: ProblemSink | None = None,
        turn_wait_s: float = TURN_WAIT_S,
    ) -> None:
        self.config = config
        self.environ = environ
        self.logs = logs
        self.on_problem = on_problem
        self.pins = Pins(pins)
        # the stdio servers running from this data folder (beside the approvals): those a
        # killed gateway left are ended now (vikingbot/mcp/reaper.py)
        self.running = Running(pins.parent / "running.json" if pins is not None else None)
        self.running.reap_left()
        self.turn_wait_s = turn_wait_s  # how long a turn waits for servers that are starting
        self._conns: dict[str, Connection] = {}
        self._told: set[str] = set()
        self._naming: list[str] = []  # collisions found by the last listing
        self._closing: set[asyncio.Task[None]] = set()
        self._starting: set[asyncio.Future[Any]] = set()  # starts a turn did not wait for

    @property
    def configured(self) -> bool:
        return any(s.enabled for s in self.config.bot.tools.mcp_servers.values())

    def _conn(self, name: str) -> Connection:
        cfg = self.config.bot.tools.mcp_servers[name]
        conn = self._conns.get(name)
        if conn is None:
            errlog = self.logs / f"mcp-{name}.log" if self.logs is not None else None
            conn = Connection(
                name,
                cfg,
                environ=self.environ,
                idle_s=self.config.bot.tools.mcp_idle_s,
                errlog=errlog,
                running=self.running,
            )
            self._conns[name] = conn
        return conn

    def servers(self, *, unattended: bool) -> list[str]:
        """The enabled servers a turn connects (unattended: limited by heartbeat.mcp_servers)."""
        found = [n for n, s in self.config.bot.tools.mcp_servers.items() if s.enabled]
        if not unattended:
            return found
        only = self.config.bot.heartbeat.mcp_servers
        if only is not None:
            found = [n for n in found if n in only]
        # nobody watching: a server none of whose tools bot.heartbeat.safe_tools can name
        # would offer nothing, so it is not started at all
        safe = self.config.bot.heartbeat.safe_tools
        return [n for n in found if any(names_a_tool_of(e, n) for e in safe)]

    async def tools_for(self, *, unattended: bool) -> dict[str, Tool]:
        """The MCP tools a turn is offered, by the name the model sees."""
        names = self.servers(unattended=unattended)
        # a server backing off (its start failed, or outlasted a turn's wait) is left out
        # at once: it costs no turn a wait until its back-off ends
        names = [n for n in names if not self._conn(n).backing_off()]
        if not names:
            return {}
        starts = {n: asyncio.ensure_future(self._listing(n)) for n in names}
        await asyncio.wait(starts.values(), timeout=self.turn_wait_s)
        listings: dict[str, list[Listed]] = {}
        for name, fut in starts.items():
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                listings[name] = fut.result()
            elif not fut.done():
                logger.info("MCP server {} is still starting; this turn goes without it", name)
                self._conn(name).outlasted(self.turn_wait_s)
                self._keep(fut)
        return self._tools(listings)

    def _keep(self, task: asyncio.Future[Any]) -> None:
        """A start this turn did not wait for: held until it ends (a task nobody holds
        is destroyed pending, "Task was destroyed but it is pending!"), its failure
        taken (already told through ``_tell``, not "never retrieved")."""
        self._starting.add(task)

        def done(t: asyncio.Future[Any]) -> None:
            self._starting.discard(t)
            if not t.cancelled():
                t.exception()

        task.add_done_callback(done)

    async def _listing(self, name: str) -> list[Listed]:
        conn = self._conn(name)
        try:
            listed = await conn.ensure()
        except McpError as exc:
            self._tell(name, str(exc))
            raise
        self._told.discard(name)
        return listed

    def _tools(self, listings: dict[str, list[Listed]]) -> dict[str, Tool]:
        servers = self.config.bot.tools.mcp_servers
        pairs = [
            (server, t.name)
            for server, listed in listings.items()
            for t in listed
            if enabled(server, t.name, servers[server].enabled_tools)
        ]
        named, problems = name_tools(pairs)
        if problems != self._naming:
            for problem in problems:
                logger.warning("MCP tools refused: {}", problem)
        self._naming = problems
        by_key = {(s, t.name): t for s, listed in listings.items() for t in listed}
        tools: dict[str, Tool] = {}
        for n in named:
            listed = by_key[(n.server, n.tool)]
            tools[n.name] = McpTool(
                n.name,
                server=n.server,
                tool=n.tool,
                identity=servers[n.server].identity,
                description=listed.description,
                parameters=listed.input_schema,
                call=self.call,
                pins=self.pins,
            )
        return tools

    async def call(self, server: str, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        """Call one tool of one server: (text, is_error); ``McpError`` when it cannot."""
        if server not in self.config.bot.tools.mcp_servers:
            raise McpError(f"MCP server {server!r} is no longer configured")
        return await self._conn(server).call(tool, args)

    def _tell(self, server: str, problem: str) -> None:
        if server in self._told:
            return
        self._told.add(server)
        if self.on_problem is not None:
            try:
                self.on_problem(server, problem)
            except Exception:  # a failing notice must not fail the turn
                logger.exception("telling the owner about MCP server {} failed", server)

    # ------------------------------------------------------------ lifecycle

    async def start_eager(self) -> None:
        """Start the ``eager: true`` servers (failures are told, never raised)."""
        eager = [n for n, s in self.config.bot.tools.mcp_servers.items() if s.enabled and s.eager]
        await asyncio.gather(*(self._listing(n) for n in eager), return_exceptions=True)

    def reconfigure(self, config: Config) -> None:
        """Use a new config; servers whose entry changed or went are stopped."""
        old, self.config = self.config, config
        new = config.bot.tools.mcp_servers
        for name in list(self._conns):
            if new.get(name) != old.bot.tools.mcp_servers.get(name) or (
                config.bot.tools.mcp_idle_s != old.bot.tools.mcp_idle_s
            ):
                conn = self._conns.pop(name)
                self._told.discard(name)
                task = asyncio.ensure_future(conn.stop())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Stop every server (the gateway's stop, the end of a CLI run)."""
        conns = list(self._conns.values())  # kept: their status and problems stay readable
        for start in list(self._starting):
            start.cancel()
        await asyncio.gather(
            *(c.stop() for c in conns), *self._closing, *self._starting, return_exceptions=True
        )

    # ------------------------------------------------------------ status

    def status(self) -> list[ServerStatus]:
        out = []
        for name, cfg in self.config.bot.tools.mcp_servers.items():
            conn = self._conns.get(name)
            out.append(
                ServerStatus(
                    name=name,
                    kind=cfg.kind,
                    identity=cfg.shown,
                    state="disabled" if not cfg.enabled else (conn.state if conn else "stopped"),
                    tools=len(conn.listed) if conn else 0,
                    starts=conn.starts if conn else 0,
                    problem=conn.problem if conn else None,
                )
            )
        return out

    def problems(self) -> list[str]:
        """A sentence for each server that failed and each naming collision (for /health)."""
        found = [s.problem for s in self.status() if s.state == "failed" and s.problem]
        return [*found, *self._naming]
