"""The leaf parts of one vikingbot home, built on first use: the CLI's convenience.

CLI commands that act locally (heartbeat run-now, cron run, chat) use it; the
gateway takes it as its ``compose.Home`` and builds every service from explicit
parts in ``vikingbot/gateway/compose.py`` (so does :meth:`Runtime.heartbeat`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from vikingbot.clock import Clock, SystemClock
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.skills.discover import user_dir

if TYPE_CHECKING:
    from vikingbot.agent.types import AgentLoop, Readiness
    from vikingbot.bus import MessageBus
    from vikingbot.delivery.service import DeliveryService
    from vikingbot.heartbeat.service import HeartbeatService
    from vikingbot.mcp.hub import McpHub
    from vikingbot.metrics import Metrics
    from vikingbot.session.store import SessionStore
    from vikingbot.store.db import StateStore
    from vikingbot.store.leases import Leases
    from vikingbot.workspace.manager import WorkspaceManager


class Runtime:
    def __init__(
        self,
        config: Config,
        paths: Paths,
        *,
        clock: Clock | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.paths = paths
        self.clock: Clock = clock or SystemClock()
        if environ is None:
            from vikingbot.config.loader import dotenv_values_for

            # .env values (e.g. GITHUB_TOKEN for checkers), real variables win
            environ = {**dotenv_values_for(paths.home), **os.environ}
        self.environ: Mapping[str, str] = dict(environ)
        self._agent: AgentLoop | None = None

    @cached_property
    def store(self) -> StateStore:
        from vikingbot.store.db import StateStore

        return StateStore.open(self.paths.database_url, clock=self.clock)

    @cached_property
    def sessions(self) -> SessionStore:
        from vikingbot.session.store import SessionStore

        return SessionStore(self.paths.sessions_dir, clock=self.clock)

    @cached_property
    def workspaces(self) -> WorkspaceManager:
        from vikingbot.workspace.manager import WorkspaceManager

        return WorkspaceManager(self.paths.workspace_root, self.config.bot.sandbox.mode)

    @cached_property
    def bus(self) -> MessageBus:
        from vikingbot.bus import MessageBus

        return MessageBus()

    @cached_property
    def delivery(self) -> DeliveryService:
        from vikingbot.delivery.service import DeliveryService

        return DeliveryService(
            self.config, store=self.store, sessions=self.sessions, clock=self.clock
        )

    def readiness(self) -> Readiness:
        """Whether the configured agent loop can answer, or what to set (asked of the loop).

        Asking builds no state store: before the agent is built the question goes to a
        loop made without one, so `vikingbot status` on a fresh home neither creates
        the database nor pays for its migrations (a loop's readiness reads the config
        and the environment only, docs/agents.md)."""
        from vikingbot.agent.types import Readiness
        from vikingbot.errors import NotConfiguredError

        try:
            loop = self._agent if self._agent is not None else self._loop(store=None)
            return loop.readiness()
        except NotConfiguredError as exc:  # the loop itself cannot be loaded
            return Readiness.missing(str(exc))

    def agent(self) -> AgentLoop:
        """The configured agent loop (built once; the provider connects on first use)."""
        if self._agent is None:
            self._agent = self.new_agent()
        return self._agent

    def new_agent(self, **extra: Any) -> AgentLoop:
        """A fresh loop of the configured kind from this home's parts; ``extra`` goes to
        its constructor (a terminal chat's ``approval_callback`` and ``on_tool_call``)."""
        return self._loop(store=self.store, mcp=self.mcp, **extra)

    @cached_property
    def mcp(self) -> McpHub:
        """The MCP servers of this home (none start until a turn needs them; docs/mcp.md)."""
        from vikingbot.mcp.hub import McpHub

        return McpHub(
            self.config,
            environ=self.environ,
            logs=self.paths.logs_dir,
            pins=self.paths.data_dir / "mcp" / "approved.json",
        )

    def _loop(self, *, store: StateStore | None, **extra: Any) -> AgentLoop:
        from vikingbot import registry

        loop_cls: type[AgentLoop] = registry.load_ready("loops", self.config.bot.agents.loop)
        return loop_cls(
            self.config,
            sessions=self.sessions,
            store=store,
            bus=self.bus,
            workspaces=self.workspaces,
            clock=self.clock,
            environ=self.environ,
            user_skills=user_dir(self.paths.home),
            **extra,
        )

    def heartbeat(
        self,
        *,
        metrics: Metrics | None = None,
        agent: AgentLoop | None = None,
        leases: Leases | None = None,
        claims: bool = True,
        owner: str | None = None,
    ) -> HeartbeatService:
        """The heartbeat, built by the gateway's composition root from this home's parts
        (it never sees the runtime), so the CLI's local runs are wired like the gateway's.

        Units are claimed in the state store (``leases``, default: this store's), so
        two gateways on one database never run the same unit.
        """
        from vikingbot.gateway import compose

        return compose.heartbeat(
            compose.Core.of(self),
            metrics=metrics,
            agent=agent,
            leases=leases,
            claims=claims,
            owner=owner,
        )

    def reconfigure(self, config: Config) -> None:
        """Apply a reloaded config to the parts that read it at run time."""
        self.config = config
        if self._agent is not None:
            self._agent.reconfigure(config)
        if "delivery" in self.__dict__:
            self.delivery.config = config
        if "mcp" in self.__dict__:
            self.mcp.reconfigure(config)

    async def aclose(self) -> None:
        """Close the agent's provider connections, then the store."""
        agent, self._agent = self._agent, None
        if agent is not None:
            await agent.aclose()
        if "mcp" in self.__dict__:  # every MCP server this run started
            await self.mcp.aclose()
        self.close()

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.close()
