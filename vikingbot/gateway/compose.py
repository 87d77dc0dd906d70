"""The gateway's composition root: every service built here, in order, from explicit parts.

Read top to bottom, this is the gateway: the core parts (:class:`Core`: config,
paths, clock, state store, sessions, workspaces, bus, delivery, the agent loop),
then the registry of gateways sharing the database, the channels (connected as
delivery's only way out), chat and dashboard dispatch, the heartbeat, cron and
housekeeping, and the HTTP app (health, metrics, channel routes, control API,
dashboard). No service sees the ``Runtime`` or any part it was not given.

``gateway/supervisor.py`` only starts, supervises, serves and stops what this
module builds.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from vikingbot.agent.types import AgentLoop, Readiness, TurnResult, TurnRunner
    from vikingbot.bus import MessageBus
    from vikingbot.channels.base import Spawn
    from vikingbot.channels.manager import ChannelManager
    from vikingbot.clock import Clock
    from vikingbot.config.loader import Paths
    from vikingbot.config.schema import Config
    from vikingbot.cron.service import CronService
    from vikingbot.delivery.service import DeliveryService
    from vikingbot.gateway.dispatch import Dispatcher
    from vikingbot.gateway.ops import ControlOps
    from vikingbot.gateway.registry import GatewayRegistry
    from vikingbot.heartbeat.notices import Notifier
    from vikingbot.heartbeat.service import HeartbeatService
    from vikingbot.housekeeping.service import HousekeepingService
    from vikingbot.mcp.hub import McpHub
    from vikingbot.metrics import Metrics
    from vikingbot.session.store import SessionStore
    from vikingbot.session.types import SessionKey
    from vikingbot.store.db import StateStore
    from vikingbot.store.leases import Leases
    from vikingbot.workspace.manager import WorkspaceManager


class Home(Protocol):
    """What the gateway is built from: one home's config and leaf parts (the CLI's
    ``vikingbot.runtime.Runtime`` is one), plus reloading the config and closing."""

    config: Config
    paths: Paths
    environ: Mapping[str, str]
    clock: Clock

    @property
    def store(self) -> StateStore: ...
    @property
    def sessions(self) -> SessionStore: ...
    @property
    def workspaces(self) -> WorkspaceManager: ...
    @property
    def bus(self) -> MessageBus: ...
    @property
    def delivery(self) -> DeliveryService: ...
    @property
    def mcp(self) -> McpHub: ...
    def agent(self) -> AgentLoop: ...
    def readiness(self) -> Readiness: ...
    def reconfigure(self, config: Config) -> None: ...
    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Core:
    """The parts every service is built from.

    ``config`` is read at call time (the gateway reloads the config file);
    ``agent`` builds the configured loop on first use, so a gateway without a
    provider still starts.
    """

    config: Callable[[], Config]
    paths: Paths
    environ: Mapping[str, str]
    clock: Clock
    store: StateStore
    sessions: SessionStore
    workspaces: WorkspaceManager
    bus: MessageBus
    delivery: DeliveryService
    agent: Callable[[], AgentLoop]
    readiness: Callable[[], Readiness]

    @classmethod
    def of(cls, rt: Home) -> Core:
        """A home's parts, made explicit (the store is opened here)."""
        return cls(
            config=lambda: rt.config,
            paths=rt.paths,
            environ=rt.environ,
            clock=rt.clock,
            store=rt.store,
            sessions=rt.sessions,
            workspaces=rt.workspaces,
            bus=rt.bus,
            delivery=rt.delivery,
            agent=rt.agent,
            readiness=rt.readiness,
        )

    def agent_problem(self) -> str | None:
        return self.readiness().problem


class LazyAgent:
    """The agent loop as a ``TurnRunner``, built on the first turn."""

    def __init__(self, agent: Callable[[], AgentLoop]) -> None:
        self._agent = agent

    async def run_turn(
        self,
        prompt: str,
        session_key: Any,
        metadata: dict[str, Any] | None = None,
        *,
        deliver: Any = None,
    ) -> TurnResult:
        return await self._agent().run_turn(prompt, session_key, metadata, deliver=deliver)


# ---------------------------------------------------------------- services, in order


def registry(core: Core, address: str) -> GatewayRegistry:
    """This gateway's row among the gateways sharing the database."""
    from vikingbot.gateway.registry import GatewayRegistry

    lease_s = core.config().bot.gateway.lease_s  # silent for two leases: dead
    return GatewayRegistry(core.store, core.clock, address=address, dead_after_s=2 * lease_s)


def channels(core: Core, sender: str, spawn: Spawn | None = None) -> ChannelManager:
    """The channel manager, connected as delivery's only way out (started by the gateway);
    ``spawn`` runs its background loops (the outbox sweep, lease keepers) supervised."""
    from vikingbot.channels.manager import ChannelManager

    manager = ChannelManager(
        core.config(),
        bus=core.bus,
        store=core.store,
        clock=core.clock,
        on_resent=core.delivery.record_resent,
        sender=sender,
        spawn=spawn,
    )
    core.delivery.connect(manager.send)
    return manager


def dispatch(core: Core) -> Dispatcher:
    """Chat messages, dashboard prompts and control-API chats become turns."""
    from vikingbot.gateway.dispatch import Dispatcher

    return Dispatcher(
        agent=core.agent,
        agent_problem=core.agent_problem,
        delivery=core.delivery,
        sessions=core.sessions,
        store=core.store,
        clock=core.clock,
    )


def heartbeat(
    core: Core,
    *,
    metrics: Metrics | None = None,
    agent: TurnRunner | None = None,
    leases: Leases | None = None,
    claims: bool = True,
    owner: str | None = None,
) -> HeartbeatService:
    """The heartbeat from its parts; units are claimed in the state store (``leases``,
    as ``owner``: this host and process by default; ``claims=False``: no claims)."""
    from vikingbot.heartbeat.checkers import run_check
    from vikingbot.heartbeat.service import HeartbeatService
    from vikingbot.heartbeat.turn import Turns
    from vikingbot.skills.discover import user_dir
    from vikingbot.store.leases import Leases

    delivery = core.delivery
    skills = user_dir(core.paths.home)
    turns = Turns(
        core.config,
        agent=agent if agent is not None else LazyAgent(core.agent),
        delivery=delivery,
        reset=core.sessions.reset,
        user_skills=skills,
    )

    async def send_notice(text: str, key: str) -> Any:
        return await delivery.deliver(text, "owner", dedupe_key=key, source="heartbeat:notice")

    if claims and leases is None:
        leases = Leases(core.store, core.clock)
    return HeartbeatService(
        core.config,
        store=core.store,
        sessions=core.sessions,
        clock=core.clock,
        workspace_root=core.paths.workspace_root,
        user_skills=skills,
        turns=turns,
        check=functools.partial(
            run_check, state_dir=core.paths.data_dir / "checkers", environ=core.environ
        ),
        send_notice=send_notice,
        leases=leases if claims else None,
        owner=owner,
        metrics=metrics,
    )


def cron(core: Core, owner: str | None) -> CronService:
    from vikingbot.cron.service import CronService

    return CronService(
        core.config(),
        store=core.store,
        agent=LazyAgent(core.agent),
        delivery=core.delivery,
        sessions=core.sessions,
        workspaces=core.workspaces,
        clock=core.clock,
        owner=owner,
    )


def housekeeping(core: Core, owner: str | None) -> HousekeepingService:
    from vikingbot.housekeeping.service import HousekeepingService

    return HousekeepingService(
        core.config(),
        store=core.store,
        sessions=core.sessions,
        workspaces=core.workspaces,
        clock=core.clock,
        owner=owner,
    )


def notifier(core: Core) -> Notifier:
    """Tells the owner once (the heartbeat's mechanism), for the gateway's own notices."""
    from vikingbot.heartbeat.notices import Notifier

    async def send(text: str, key: str) -> Any:
        return await core.delivery.deliver(text, "owner", dedupe_key=key, source="gateway")

    return Notifier(core.store, send, core.clock)


def crash_notices(core: Core) -> tuple[Any, Any]:
    """``(tell, forget)`` for supervised services, over :func:`notifier`."""
    from vikingbot.gateway.services import NOTICE_WORKSPACE

    notes = notifier(core)

    async def tell(key: str, text: str) -> bool:
        return await notes.tell(NOTICE_WORKSPACE, key, text, kind="service-crash")

    async def forget(key: str) -> bool:
        return await notes.resolve(NOTICE_WORKSPACE, key)

    return tell, forget


def mcp_notices(core: Core) -> Callable[[str, str], None]:
    """What the MCP hub calls when a server cannot start: the owner is told once
    (``Notifier``, key ``mcp:<server>``), off the turn that found it."""
    from vikingbot.gateway.services import NOTICE_WORKSPACE

    notes = notifier(core)
    pending: set[asyncio.Task[bool]] = set()

    def told(server: str, problem: str) -> None:
        text = (
            f"MCP server {server} cannot be used: {problem}. Its tools are left out until it works."
        )
        task = asyncio.ensure_future(
            notes.tell(NOTICE_WORKSPACE, f"mcp:{server}", text, kind="mcp")
        )
        pending.add(task)
        task.add_done_callback(pending.discard)

    return told


# ---------------------------------------------------------------- HTTP


def control_ops(
    core: Core,
    *,
    heartbeat: HeartbeatService,
    cron: CronService | None,
    chat: Dispatcher,
    wake_heartbeat: Callable[[], None],
    services: Callable[[], dict[str, Any]],
    started_at: str,
    host: str,
    port: int,
) -> ControlOps:
    from vikingbot.delivery.inbox import Inbox
    from vikingbot.gateway.ops import ControlOps

    return ControlOps(
        heartbeat=heartbeat,
        inbox=Inbox(core.store, core.clock),
        config_file=core.paths.config_file,
        workspace_root=core.paths.workspace_root,
        agent_problem=core.agent_problem,
        wake_heartbeat=wake_heartbeat,
        cron=cron,
        chat_turn=chat.chat,
        services=services,
        started_at=started_at,
        host=host,
        port=port,
    )


def dashboard_routes(
    core: Core,
    *,
    heartbeat: HeartbeatService,
    health: Callable[[], dict[str, Any]],
    apply_config: Callable[[], Any],
    ops: ControlOps,
    stopping: asyncio.Event,
) -> list[Any]:
    """The web dashboard (/ui), from the gateway's own parts; its actions go through
    the same ``ControlOps`` as the control API."""
    from vikingbot.dashboard import DashboardParts, dashboard_routes
    from vikingbot.delivery.adapter import TurnDelivery
    from vikingbot.delivery.inbox import Inbox
    from vikingbot.gateway.lock import SECRET_FILE, run_dir
    from vikingbot.skills.discover import user_dir

    async def run_turn(prompt: str, key: SessionKey, meta: dict[str, Any]) -> Any:
        """A chat turn in a dashboard slot: what the agent sends to "this chat" with the
        message tool lands in the slot; other targets go through delivery."""

        async def to_slot(text: str) -> Any:
            add = functools.partial(Inbox(core.store, core.clock).add, key.chat_id, text)
            await asyncio.to_thread(add, source=f"message:{key.chat_id}")
            return "inboxed"

        deliver = TurnDelivery.for_chat(core.delivery, key, sink=to_slot)
        return await core.agent().run_turn(prompt, key, meta, deliver=deliver)

    parts = DashboardParts(
        store=core.store,
        clock=core.clock,
        config=core.config,
        config_file=core.paths.config_file,
        workspace_root=core.paths.workspace_root,
        secret_file=run_dir(core.paths.home) / SECRET_FILE,
        heartbeat=heartbeat,
        sessions=core.sessions,
        health=health,
        agent_problem=core.agent_problem,
        run_turn=run_turn,
        apply_config=apply_config,
        ops=ops,
        stopping=stopping,
        user_skills=user_dir(core.paths.home),
    )
    return dashboard_routes(parts)


def http_app(
    core: Core,
    *,
    channel_routes: list[Any],
    ops: ControlOps,
    dashboard: list[Any],
    health: Callable[[], dict[str, Any]],
    metrics: Metrics,
    secret: str,
    audit: Callable[[str, str, str], None],
) -> Any:
    """`/health`, `/metrics`, each channel's routes, the control API and the dashboard,
    behind the Host/Origin checks, the gateway token and the control secret."""
    from vikingbot.gateway.control import ControlGuard, control_routes
    from vikingbot.gateway.server import build_app
    from vikingbot.gateway.webguard import WebGuard, own_names

    channel_prefixes = tuple(f"{route.path}/" for route in channel_routes)
    routes = [*channel_routes, *control_routes(ops), *dashboard]
    token = core.config().bot.gateway.token
    token_text = token.get_secret_value() if token else None
    app = build_app(
        health=health,
        metrics=metrics.render,
        token=token_text,
        extra_routes=routes,
        self_authenticating=(*channel_prefixes, "/api/", "/ui/"),
    )
    gateway = core.config().bot.gateway
    guarded = ControlGuard(app, secret=secret, token=token_text, audit=audit)
    return WebGuard(guarded, own_names(gateway.host, gateway.allowed_hosts))
