"""The gateway's composition root: every service built here, in order, from explicit parts.

Read top to bottom, this is the gateway: a home's parts (:class:`Home`, made by
:func:`build_home`: config, paths, clock, environment, then, each on first use, the
state store, sessions, workspaces, bus, delivery, MCP hub and the agent loop), then
the registry of gateways sharing the database, the channels (connected as
delivery's only way out), chat and dashboard dispatch, the heartbeat, cron and
housekeeping, and the HTTP app (health, metrics, channel routes, control API,
dashboard). Each builder takes the home and hands its service only the parts it
uses; no service sees the home. The CLI's local commands use the same home and
builders.

``gateway/supervisor.py`` only starts, supervises, serves and stops what this
module builds.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from vikingbot.clock import Clock, SystemClock
from vikingbot.config.loader import Paths, home_environ
from vikingbot.config.schema import Config
from vikingbot.skills.discover import user_dir

if TYPE_CHECKING:
    from vikingbot.agent.types import AgentLoop, Readiness, TurnResult, TurnRunner
    from vikingbot.bus import MessageBus
    from vikingbot.channels.base import Spawn
    from vikingbot.channels.manager import ChannelManager
    from vikingbot.cron.service import CronService
    from vikingbot.delivery.service import DeliveryService
    from vikingbot.gateway.dispatch import Dispatcher
    from vikingbot.gateway.ops import ControlOps
    from vikingbot.gateway.registry import GatewayRegistry
    from vikingbot.heartbeat.notices import Notifier, SendNotice
    from vikingbot.heartbeat.service import HeartbeatService
    from vikingbot.housekeeping.service import HousekeepingService
    from vikingbot.mcp.hub import McpHub
    from vikingbot.media import MediaIntake
    from vikingbot.metrics import Metrics
    from vikingbot.providers.fallback import OutageEvent
    from vikingbot.session.store import SessionStore
    from vikingbot.session.types import SessionKey
    from vikingbot.store.db import StateStore
    from vikingbot.store.leases import Leases
    from vikingbot.workspace.manager import WorkspaceManager


class Home:
    """One vikingbot home's parts, each built on first use (made by :func:`build_home`).

    The config, paths, clock and environment are given; the state store, sessions,
    workspaces, bus, delivery, MCP hub and agent loop are built when first asked for,
    so a command that needs few of them pays for few (``readiness`` opens no database).
    ``config`` is the current config (``reconfigure`` replaces it); services that read
    it at run time are handed :meth:`settings`, its getter.
    """

    def __init__(
        self,
        config: Config,
        paths: Paths,
        *,
        clock: Clock,
        environ: Mapping[str, str],
        process: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.paths = paths
        self.clock = clock
        # read from the process and the .env files: one mapping, updated in place (the
        # agent, its providers, the checkers and the MCP servers hold it and see a
        # re-read .env); given outright: that mapping, as it is
        self._process = None if process is None else dict(process)
        self._own: dict[str, str] | None = None if process is None else dict(environ)
        self.environ: Mapping[str, str] = environ if self._own is None else self._own
        self._environ_changed = False  # since the agent was last reconfigured
        self._agent: AgentLoop | None = None
        self.on_outage: Callable[[OutageEvent], None] | None = None  # set by the gateway

    def reread_environ(self) -> bool:
        """Read the ``.env`` files again (the gateway, when one changed); ``True`` when a
        variable changed. A home given its environment outright keeps it. The agent is
        told at the next :meth:`reconfigure`."""
        own = self._own
        if own is None or self._process is None:
            return False
        new = home_environ(self.paths.home, self._process)
        if new == own:
            return False
        for gone in own.keys() - new.keys():
            own.pop(gone, None)
        own.update(new)
        self._environ_changed = True
        return True

    def settings(self) -> Config:
        """The current config (a reload applies without a restart)."""
        return self.config

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

    def agent_problem(self) -> str | None:
        return self.readiness().problem

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
            self._agent.on_outage = self.on_outage
        return self._agent

    def models_down(self) -> list[dict[str, str]]:
        """The models down now, as the agent saw them (none before its first turn)."""
        return self._agent.models_down() if self._agent is not None else []

    def tell_outages(self, hook: Callable[[OutageEvent], None]) -> None:
        """Model outages (a fallback answering, the model back) go to ``hook``."""
        self.on_outage = hook
        if self._agent is not None:
            self._agent.on_outage = hook

    def new_agent(self, **extra: Any) -> AgentLoop:
        """A fresh loop of the configured kind from this home's parts; ``extra`` goes to
        its constructor (a terminal chat's ``approval_callback`` and ``on_tool_call``)."""
        return self._loop(store=self.store, mcp=self.mcp, tell_owner=self._tell_owner, **extra)

    async def _tell_owner(self, text: str, key: str) -> bool:
        """A tool's lasting trouble (web_search failing), told to the owner once per key."""
        return await notifier(self).tell("gateway", key, text, kind="tool")

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

    def reconfigure(self, config: Config) -> None:
        """Apply a reloaded config to the parts that read it at run time."""
        self.config = config
        changed, self._environ_changed = self._environ_changed, False
        if self._agent is not None:
            self._agent.reconfigure(config)
            if changed:
                self._agent.environ_changed()
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


def build_home(
    config: Config,
    paths: Paths,
    *,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
) -> Home:
    """The home of ``config`` and ``paths`` (nothing is opened yet). The environment is
    the home's ``.env`` values under the real variables (re-read by ``reread_environ``)
    unless ``environ`` is given."""
    clock = clock or SystemClock()
    if environ is not None:
        return Home(config, paths, clock=clock, environ=environ)
    process = dict(os.environ)  # .env values (a provider key, GITHUB_TOKEN), real variables win
    return Home(
        config, paths, clock=clock, environ=home_environ(paths.home, process), process=process
    )


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


def registry(home: Home, address: str) -> GatewayRegistry:
    """This gateway's row among the gateways sharing the database."""
    from vikingbot.gateway.registry import GatewayRegistry

    lease_s = home.config.bot.gateway.lease_s  # silent for two leases: dead
    return GatewayRegistry(home.store, home.clock, address=address, dead_after_s=2 * lease_s)


def channels(home: Home, sender: str, spawn: Spawn | None = None) -> ChannelManager:
    """The channel manager, connected as delivery's only way out (started by the gateway);
    ``spawn`` runs its background loops (the outbox sweep, lease keepers) supervised."""
    from vikingbot.channels.manager import ChannelManager

    manager = ChannelManager(
        home.config,
        bus=home.bus,
        store=home.store,
        clock=home.clock,
        on_resent=home.delivery.record_resent,
        sender=sender,
        spawn=spawn,
        tell=channel_notices(home),
    )
    home.delivery.connect(manager.send)
    return manager


def dispatch(home: Home) -> Dispatcher:
    """Chat messages, dashboard prompts and control-API chats become turns."""
    from vikingbot.commands.pairing import PairingBook
    from vikingbot.gateway.dispatch import Dispatcher
    from vikingbot.gateway.pairing_desk import PairingDesk
    from vikingbot.gateway.steering import Steering

    steering = Steering(  # the supervisor hands it the channels and the heartbeat once built
        config=home.settings,
        sessions=home.sessions,
        audit=home.store.audit,
        workspace_of=lambda key: home.workspaces.name_for(key),
    )
    steering.pairing_desk = PairingDesk(
        PairingBook(home.paths.data_dir / "pairing.json"),
        home.paths.config_file,
        audit=home.store.audit,
        channel_of=lambda name: steering.channel_of(name),
    )
    return Dispatcher(
        agent=home.agent,
        agent_problem=home.agent_problem,
        delivery=home.delivery,
        sessions=home.sessions,
        store=home.store,
        clock=home.clock,
        media=media(home),
        workspace_for=home.workspaces.workspace_for,
        steering=steering,
    )


def media(home: Home) -> MediaIntake:
    """What takes in the pictures, voice notes and files people send (docs/media.md)."""
    from vikingbot.media import MediaIntake

    return MediaIntake(home.settings, clock=home.clock, store=home.store, environ=home.environ)


def heartbeat(
    home: Home,
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
    from vikingbot.media.workspace_images import workspace_images
    from vikingbot.store.leases import Leases

    skills = user_dir(home.paths.home)
    turns = Turns(
        home.settings,
        agent=agent if agent is not None else LazyAgent(home.agent),
        delivery=home.delivery,
        reset=home.sessions.reset,
        user_skills=skills,
        pictures=functools.partial(workspace_images, home.settings),
    )

    if claims and leases is None:
        leases = Leases(home.store, home.clock)
    return HeartbeatService(
        home.settings,
        store=home.store,
        sessions=home.sessions,
        clock=home.clock,
        workspace_root=home.paths.workspace_root,
        user_skills=skills,
        turns=turns,
        check=functools.partial(
            run_check, state_dir=home.paths.data_dir / "checkers", environ=home.environ
        ),
        send_notice=to_owner(home, "heartbeat:notice"),
        leases=leases if claims else None,
        owner=owner,
        metrics=metrics,
    )


def cron(home: Home, owner: str | None) -> CronService:
    from vikingbot.cron.service import CronService

    return CronService(
        home.config,
        store=home.store,
        agent=LazyAgent(home.agent),
        delivery=home.delivery,
        sessions=home.sessions,
        workspaces=home.workspaces,
        clock=home.clock,
        owner=owner,
    )


def housekeeping(home: Home, owner: str | None) -> HousekeepingService:
    from vikingbot.housekeeping.service import HousekeepingService
    from vikingbot.memory.model import provider_call

    return HousekeepingService(
        home.config,
        store=home.store,
        sessions=home.sessions,
        workspaces=home.workspaces,
        clock=home.clock,
        owner=owner,
        complete=provider_call(home.settings, home.environ),
    )


def notifier(home: Home) -> Notifier:
    """Tells the owner once (the heartbeat's mechanism), for the gateway's own notices."""
    from vikingbot.heartbeat.notices import Notifier

    return Notifier(home.store, to_owner(home, "gateway"), home.clock)


def to_owner(home: Home, source: str) -> SendNotice:
    """``send(text, dedupe_key)``: a notice for the owner, through delivery."""

    async def send(text: str, key: str) -> Any:
        return await home.delivery.deliver(text, "owner", dedupe_key=key, source=source)

    return send


def crash_notices(home: Home) -> tuple[Any, Any]:
    """``(tell, forget)`` for supervised services, over :func:`notifier`."""
    from vikingbot.gateway.services import NOTICE_WORKSPACE

    notes = notifier(home)

    async def tell(key: str, text: str) -> bool:
        return await notes.tell(NOTICE_WORKSPACE, key, text, kind="service-crash")

    async def forget(key: str) -> bool:
        return await notes.resolve(NOTICE_WORKSPACE, key)

    return tell, forget


def channel_notices(home: Home) -> Callable[[str, str], Awaitable[bool]]:
    """``tell(key, text)`` for channels: the owner is told once per key (``Notifier``)."""
    from vikingbot.gateway.services import NOTICE_WORKSPACE

    notes = notifier(home)

    async def tell(key: str, text: str) -> bool:
        return await notes.tell(NOTICE_WORKSPACE, f"channel:{key}", text, kind="channel")

    return tell


def mcp_notices(home: Home) -> Callable[[str, str], None]:
    """What the MCP hub calls when a server cannot start: the owner is told once
    (``Notifier``, key ``mcp:<server>``), off the turn that found it."""
    from vikingbot.gateway.services import NOTICE_WORKSPACE

    notes = notifier(home)
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


def outage_notices(home: Home) -> Callable[[OutageEvent], None]:
    """What the agent calls when a model has an outage and a fallback answered, and when
    the model is back: the owner is told once per outage (``Notifier``), off the turn."""
    from vikingbot.gateway.services import NOTICE_WORKSPACE

    notes = notifier(home)
    pending: set[asyncio.Task[bool]] = set()

    def told(event: OutageEvent) -> None:
        if event.kind in ("back", "answering"):  # over: said only if it had been told
            work = _back(notes, NOTICE_WORKSPACE, event)
        else:
            work = notes.tell(NOTICE_WORKSPACE, event.key, event.text(), kind="model-outage")
        task = asyncio.get_running_loop().create_task(work, name=f"notice:{event.key}")
        pending.add(task)
        task.add_done_callback(pending.discard)

    return told


async def _back(notes: Notifier, workspace: str, event: OutageEvent) -> bool:
    """The model answers again: forget the outage's notice; say so if it was told."""
    if await notes.resolve(workspace, event.key):
        await notes.announce(workspace, event.text())
        return True
    return False


# ---------------------------------------------------------------- HTTP


def control_ops(
    home: Home,
    *,
    heartbeat: HeartbeatService,
    cron: CronService | None,
    chat: Dispatcher,
    wake_heartbeat: Callable[[], None],
    services: Callable[[], dict[str, Any]],
    started_at: str,
    host: str,
    port: int,
    reload_config: Callable[[], Awaitable[dict[str, Any]]] | None = None,
) -> ControlOps:
    from vikingbot.delivery.inbox import Inbox
    from vikingbot.gateway.ops import ControlOps

    return ControlOps(
        heartbeat=heartbeat,
        inbox=Inbox(home.store, home.clock),
        config_file=home.paths.config_file,
        workspace_root=home.paths.workspace_root,
        agent_problem=home.agent_problem,
        wake_heartbeat=wake_heartbeat,
        cron=cron,
        chat_turn=chat.chat,
        steering=chat.steering,
        services=services,
        started_at=started_at,
        host=host,
        port=port,
        reload_config=reload_config,
    )


def dashboard_routes(
    home: Home,
    *,
    heartbeat: HeartbeatService,
    health: Callable[[], dict[str, Any]],
    apply_config: Callable[[], Any],
    ops: ControlOps,
    stopping: asyncio.Event,
    take_files: Any = None,
) -> list[Any]:
    """The web dashboard (/ui), from the gateway's own parts; its actions go through
    the same ``ControlOps`` as the control API (``take_files``: the dispatcher's media
    intake for files sent on the chat form)."""
    from vikingbot.dashboard import DashboardParts, dashboard_routes
    from vikingbot.delivery.adapter import TurnDelivery
    from vikingbot.delivery.inbox import Inbox
    from vikingbot.gateway.lock import SECRET_FILE, run_dir
    from vikingbot.skills.discover import user_dir

    async def run_turn(prompt: str, key: SessionKey, meta: dict[str, Any]) -> Any:
        """A chat turn in a dashboard slot: what the agent sends to "this chat" with the
        message tool lands in the slot; other targets go through delivery."""

        async def to_slot(text: str) -> Any:
            add = functools.partial(Inbox(home.store, home.clock).add, key.chat_id, text)
            await asyncio.to_thread(add, source=f"message:{key.chat_id}")
            return "inboxed"

        deliver = TurnDelivery.for_chat(home.delivery, key, sink=to_slot)
        return await home.agent().run_turn(prompt, key, meta, deliver=deliver)

    parts = DashboardParts(
        store=home.store,
        clock=home.clock,
        config=home.settings,
        config_file=home.paths.config_file,
        workspace_root=home.paths.workspace_root,
        secret_file=run_dir(home.paths.home) / SECRET_FILE,
        heartbeat=heartbeat,
        sessions=home.sessions,
        health=health,
        agent_problem=home.agent_problem,
        run_turn=run_turn,
        apply_config=apply_config,
        ops=ops,
        stopping=stopping,
        user_skills=user_dir(home.paths.home),
        take_files=take_files,
    )
    return dashboard_routes(parts)


def openai_api(home: Home, *, inflight: set[asyncio.Task[Any]]) -> list[Any]:
    """The OpenAI-compatible API (/v1, docs/openai-api.md) from the parts it uses: the
    client tokens, the config getter, a turn runner over the agent and delivery (what the
    agent sends to "this chat" is part of the answer), and the audit."""
    from vikingbot.agent.streaming import TURN_STREAM
    from vikingbot.delivery.adapter import TurnDelivery
    from vikingbot.gateway.control import MAX_BODY_BYTES
    from vikingbot.openai_api.live import Transcript
    from vikingbot.openai_api.routes import Answer, openai_routes
    from vikingbot.openai_api.tokens import TokenStore, tokens_file

    async def run(prompt: str, key: SessionKey, meta: dict[str, Any], live: Transcript) -> Answer:
        problem = home.agent_problem()
        if problem:
            return Answer("", error=problem, not_ready=True)
        await asyncio.to_thread(home.sessions.get_or_create, key)

        async def to_client(text: str) -> Any:
            live.said(text)
            return "delivered"

        deliver = TurnDelivery.for_chat(home.delivery, key, sink=to_client)
        streaming = TURN_STREAM.set(live)  # the model's text as it writes (openai_api/live)
        try:
            result = await home.agent().run_turn(prompt, key, meta, deliver=deliver)
        finally:
            TURN_STREAM.reset(streaming)
        if result.ended in ("error", "timeout"):
            return Answer("", result.model, error=result.error or f"the turn ended: {result.ended}")
        text = live.finish(result.text)
        return Answer(text, result.model, result.tokens_in, result.tokens_out)

    def audit(actor: str, action: str, subject: str, outcome: str, details: Any) -> None:
        home.store.audit(actor, action, subject, outcome, details=details)

    return openai_routes(
        tokens=TokenStore(tokens_file(home.paths.data_dir)),
        settings=home.settings,
        run=run,
        audit=audit,
        max_body=MAX_BODY_BYTES,
        inflight=inflight,
    )


def bot_door(
    home: Home,
    *,
    plan: Callable[[str | None], Awaitable[dict[str, Any]]],
    run_now: Callable[[str | None], Awaitable[Any]],
) -> Any:
    """The MCP server's tools (``mcp_server.door.BotDoor``) over this home: its inbox,
    delivery to the owner, history search and audit; ``plan`` and ``run_now`` are the
    gateway's (or, for ``vikingbot mcp serve`` without one, a local heartbeat's)."""
    import uuid

    from vikingbot.delivery.inbox import Inbox
    from vikingbot.gateway.ops import inbox_list
    from vikingbot.housekeeping.search import search
    from vikingbot.mcp_server.door import BotDoor

    inbox = Inbox(home.store, home.clock)

    async def items(slot: str | None, unread: bool, limit: int) -> list[dict[str, Any]]:
        return await asyncio.to_thread(inbox_list, inbox, slot=slot, unread=unread, limit=limit)

    async def tell_owner(text: str) -> dict[str, Any]:
        report = await home.delivery.deliver(
            text, "owner", dedupe_key=f"mcp:{uuid.uuid4().hex}", source="mcp"
        )
        return {
            "delivered": report.delivered,
            "inboxed": report.inboxed,
            "failed": report.failed,
            "refused": report.refused,
        }

    def audit(actor: str, action: str, subject: str, outcome: str, reason: str | None) -> None:
        home.store.audit(actor, action, subject, outcome, reason=reason)

    return BotDoor(
        plan=plan,
        run_now=run_now,
        inbox=items,
        tell_owner=tell_owner,
        search=lambda q, n: [hit.to_dict() for hit in search(home.store, q, n)],
        audit=audit,
        workspace_root=home.paths.workspace_root,
        clock=home.clock,
    )


def mcp_http(home: Home, *, ops: ControlOps) -> tuple[list[Any], Callable[[], Awaitable[None]]]:
    """The bot's MCP server on the gateway (``/mcp``, Streamable HTTP, client tokens with
    the ``mcp`` scope): its routes and its close."""
    from starlette.routing import Route

    from vikingbot.mcp_server.server import HttpDoor
    from vikingbot.openai_api.tokens import TokenStore, tokens_file

    door = bot_door(
        home,
        plan=ops.heartbeat_plan,
        run_now=lambda ws: ops.heartbeat_run_now(workspace=ws, force=False),
    )
    app = HttpDoor(door, TokenStore(tokens_file(home.paths.data_dir)))
    return [Route("/mcp", app, methods=["GET", "POST", "DELETE"])], app.aclose


def http_app(
    home: Home,
    *,
    channel_routes: list[Any],
    ops: ControlOps,
    dashboard: list[Any],
    health: Callable[[], Awaitable[dict[str, Any]]],
    metrics: Metrics,
    secret: str,
    audit: Callable[[str, str, str], None],
    doors: Sequence[Any] = (),  # the ecosystem's doors (OpenAI API, MCP), each its own builder
) -> Any:
    """`/health`, `/metrics`, each channel's routes, the control API and the dashboard,
    behind the Host/Origin checks, the gateway token and the control secret."""
    from vikingbot.gateway.control import ControlGuard, control_routes
    from vikingbot.gateway.server import build_app
    from vikingbot.gateway.webguard import WebGuard, own_names

    channel_prefixes = tuple(f"{route.path}/" for route in channel_routes)
    routes = [*channel_routes, *control_routes(ops), *dashboard, *doors]
    token = home.config.bot.gateway.token
    token_text = token.get_secret_value() if token else None
    app = build_app(
        health=health,
        metrics=metrics.render,
        token=token_text,
        extra_routes=routes,
        self_authenticating=(*channel_prefixes, "/api/", "/ui/", "/v1/", "/mcp"),
    )
    gateway = home.config.bot.gateway
    guarded = ControlGuard(app, secret=secret, token=token_text, audit=audit)
    from vikingbot.gateway.bodycap import BodyCap

    return BodyCap(WebGuard(guarded, own_names(gateway.host, gateway.allowed_hosts)))
