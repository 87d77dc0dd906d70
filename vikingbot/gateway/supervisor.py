"""The gateway: starts every service, serves HTTP, reloads config, stops cleanly.

Services run as asyncio tasks next to the HTTP server. A service that fails to
start is reported (``✗``) and the rest keep running. On SIGINT/SIGTERM the
gateway stops taking work, gives running turns ``bot.gateway.shutdown_grace_s``
to finish, cancels what is left and flushes state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from loguru import logger

from vikingbot import __version__
from vikingbot.config.loader import load_config
from vikingbot.errors import ConfigError, VikingbotError
from vikingbot.gateway.peers import is_loopback
from vikingbot.metrics import Metrics
from vikingbot.runtime import Runtime

Say = Callable[[str], None]
CANCEL_WAIT_S = 1.0  # how long cancelled work and channels get to wind down


@dataclass
class ServiceState:
    name: str
    running: bool = False
    detail: str = ""
    task: asyncio.Task[Any] | None = field(default=None, repr=False)


class Gateway:
    def __init__(
        self,
        runtime: Runtime,
        *,
        host: str | None = None,
        port: int | None = None,
        say: Say = print,
        config_poll_s: float = 2.0,
    ) -> None:
        self.rt = runtime
        gw = runtime.config.bot.gateway
        self.host = host or gw.host
        self.port = port if port is not None else gw.port
        self.say = say
        self.metrics = Metrics()
        self.services: dict[str, ServiceState] = {}
        self.stop_event = asyncio.Event()
        self.started_at = datetime.now(UTC)
        self.config_poll_s = config_poll_s
        self._config_mtime: float | None = None
        self.heartbeat: Any = None
        self.channels: Any = None
        self.housekeeping: Any = None
        self._inbound_tasks: set[asyncio.Task[Any]] = set()
        self.cron: Any = None
        self._dispatch: Any = None
        self.home_lock: Any = None
        self.ops: Any = None
        self._server_task: asyncio.Task[Any] | None = None
        self._sock: Any = None  # the HTTP port, bound at start (bind_port), served later
        self.registry: Any = None  # gateway/registry.GatewayRegistry once the store is open
        self.peers: list[dict[str, Any]] = []  # the gateways sharing the database (cached)
        self.store_error: str | None = None  # the last registry beat failed: database away

    @property
    def dispatch(self) -> Any:
        """Chat and dashboard turns (built on first use)."""
        if self._dispatch is None:
            from vikingbot.gateway.dispatch import Dispatcher

            self._dispatch = Dispatcher(
                agent=self.rt.agent,
                agent_problem=lambda: self.rt.readiness().problem,
                delivery=self.rt.delivery,
                sessions=self.rt.sessions,
                store=self.rt.store,
                clock=self.rt.clock,
            )
        return self._dispatch

    # ------------------------------------------------------------ lifecycle

    def check_bind(self) -> None:
        token = self.rt.config.bot.gateway.token
        if not is_loopback(self.host) and not (token and token.get_secret_value()):
            raise ConfigError(
                f"refusing to listen on {self.host}: a non-loopback address needs "
                "bot.gateway.token (set it, or bind 127.0.0.1)"
            )

    def bind_port(self) -> None:
        """Bind the HTTP port now, without listening yet (see :meth:`_publish`).

        Connections are refused until the server listens; the address is ours
        from here on, so nobody can take it while the gateway starts.
        """
        import socket

        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror} "
                "(is another gateway running? change bot.gateway.port or pass --port)"
            ) from exc
        sock.set_inheritable(False)
        self.port = int(sock.getsockname()[1])
        self._sock = sock

    def take_home(self) -> None:
        """Hold the home (one gateway per home on the embedded store); see gateway/lock.py."""
        from vikingbot.gateway.lock import HomeLock, needs_home_lock

        self.home_lock = HomeLock(
            self.rt.paths.home, exclusive=needs_home_lock(self.rt.paths.database_url)
        )
        self.home_lock.acquire()

    async def run(self) -> int:
        self.check_bind()
        if self.home_lock is None:
            self.take_home()
        try:
            return await self._run()
        finally:
            if self._sock is not None:
                self._sock.close()
            self.home_lock.release()

    async def _run(self) -> int:
        self.bind_port()
        self._publish()  # before serving: a client that can connect can also find us
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.request_stop, sig)
        self.say(f"vikingbot {__version__} gateway")
        self.say(f"  config: {self.rt.paths.config_file}")
        self.say(f"  data:   {self.rt.paths.data_dir}")
        ready = self.rt.readiness()
        if not ready.ready:
            self.say(f"✗ Agent: {ready.problem}")
        else:
            self.say(f"✓ Agent: {self.rt.config.bot.agents.loop}: {ready.detail}")
            self._spawn("agent-warmup", self._warm_agent, "loading the model SDK")
        await asyncio.to_thread(lambda: self.rt.store)  # open + migrate before serving
        self._stat_config()

        await self._start_services()
        server = await self._start_http()
        self.say(f"✓ HTTP: http://{self.host}:{self.port}  (/health, /metrics, /api/v1)")
        logger.info("gateway started on {}:{}", self.host, self.port)

        await self.stop_event.wait()
        self.say("stopping…")
        await self._shutdown(server)
        self.say("stopped")
        return 0

    def request_stop(self, sig: int | None = None) -> None:
        """First signal: stop gracefully (bounded, see _shutdown). Second: exit now."""
        if sig is not None and self.stop_event.is_set():
            logger.warning("second {}: exiting at once", signal.Signals(sig).name)
            self.say("second signal: exiting now (unsent messages stay in the outbox)")
            with contextlib.suppress(Exception):
                logger.complete()
            os._exit(1)
        if sig is not None:
            logger.info("received signal {}; shutting down", signal.Signals(sig).name)
        self.stop_event.set()

    async def _shutdown(self, server: Any) -> None:
        """Stop within ``shutdown_grace_s`` (default 2 s) plus a bounded clean-up.

        Services start nothing new; running turns get the grace period, then are
        cancelled (the agent loop keeps sessions consistent on cancellation; cron
        records ``interrupted``; unsent messages stay in the outbox).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.rt.config.bot.gateway.shutdown_grace_s
        for svc in (self.heartbeat, self.housekeeping):
            if svc is not None and hasattr(svc, "stop"):
                svc.stop()
        tasks = {s.task for s in self.services.values() if s.task is not None}
        tasks |= set(self._inbound_tasks)
        if self.ops is not None:
            tasks |= set(self.ops.inflight)  # control-API requests (a CLI run-now, a chat)
        if self.heartbeat is not None:
            tasks |= set(getattr(self.heartbeat, "_tasks", ()))
        pending = {t for t in tasks if not t.done()}
        if pending:
            _, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - loop.time()))
        if pending:
            logger.info("stopping: cancelling {} running task(s)", len(pending))
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=CANCEL_WAIT_S)
        server.should_exit = True
        wake = getattr(server, "wake", None)
        if wake is not None:
            wake.set()
        ending = [t for t in (self._server_task,) if t is not None]
        if self.channels is not None:
            ending.append(asyncio.ensure_future(self.channels.stop()))
        if ending:  # channels and the HTTP server wind down together, bounded
            _, late = await asyncio.wait(ending, timeout=CANCEL_WAIT_S)
            for task in late:
                task.cancel()
        if self.registry is not None:
            with contextlib.suppress(VikingbotError):
                await asyncio.to_thread(self.registry.stopped)
        await self.rt.aclose()

    # ------------------------------------------------------------ services

    def _spawn(self, name: str, factory: Callable[[], Awaitable[Any]], detail: str) -> None:
        state = ServiceState(name, running=True, detail=detail)

        async def guarded() -> None:
            try:
                await factory()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("service {} crashed", name)
                state.running = False
                state.detail = "crashed (see log)"
            else:
                state.running = False

        state.task = asyncio.create_task(guarded(), name=f"vikingbot:{name}")
        self.services[name] = state

    async def _register(self) -> None:
        """Join the gateways registry (several gateways may share a PostgreSQL store)."""
        from vikingbot.gateway.registry import GatewayRegistry

        self.registry = GatewayRegistry(
            self.rt.store, self.rt.clock, address=f"{self.host}:{self.port}"
        )
        try:
            await asyncio.to_thread(self.registry.register)
            await self._beat()
        except VikingbotError as exc:
            logger.warning("gateway registry: {}", exc)
        self._spawn("registry", self._beat_forever, f"gateway id {self.registry.id}")

    async def _beat(self) -> None:
        held = self.channels.held() if self.channels is not None else []
        try:
            await asyncio.to_thread(self.registry.beat, {"channels": held})
            peers = await asyncio.to_thread(self.registry.list)
        except VikingbotError as exc:
            self.store_error = str(exc)
            raise
        self.store_error = None
        self.peers = [p.as_dict() for p in peers]

    async def _beat_forever(self, beat_s: float = 5.0) -> None:
        while not self.stop_event.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stop_event.wait(), timeout=beat_s)
            try:
                await self._beat()
            except VikingbotError as exc:
                logger.warning("gateway registry: {}", exc)

    async def _start_services(self) -> None:
        cfg = self.rt.config
        await self._register()
        # channels first: heartbeat results need somewhere to go
        try:
            from vikingbot.channels.manager import ChannelManager

            self.channels = ChannelManager(
                cfg,
                bus=self.rt.bus,
                store=self.rt.store,
                clock=self.rt.clock,
                on_resent=self.rt.delivery.record_resent,
                sender=self.registry.id,
            )
            await self.channels.start()
            self.rt.delivery.connect(self.channels.send)  # the one way out
            for row in self.channels.status():
                if row.get("enabled"):
                    mark = "✓" if row.get("running") else "✗"
                    err = f" ({row['last_error']})" if row.get("last_error") else ""
                    self.say(f"{mark} Channel {row['name']}{err}")
        except VikingbotError as exc:
            self.say(f"✗ Channels: {exc}")
        self._spawn("inbound", self._inbound_loop, "dispatching chat messages to the agent")
        self._spawn(
            "dashboard",
            lambda: self.dispatch.dashboard_prompts(self.stop_event),
            "turning prompt:dashboard results into turns",
        )

        self.heartbeat = self.rt.heartbeat(metrics=self.metrics)
        hb = cfg.bot.heartbeat
        self._spawn("heartbeat", lambda: self.heartbeat.run_forever(self.stop_event), "")
        if hb.enabled:
            self.say(f"✓ Heartbeat: every {hb.interval_seconds}s ({hb.mode})")
        else:
            self.say("✗ Heartbeat: disabled (vikingbot heartbeat enable)")

        from vikingbot.cron.service import CronService

        self.cron = cron = CronService(
            cfg,
            store=self.rt.store,
            agent=_LazyAgent(self.rt),
            delivery=self.rt.delivery,
            sessions=self.rt.sessions,
            workspaces=self.rt.workspaces,
            clock=self.rt.clock,
            owner=self.registry.id if self.registry is not None else None,
        )
        self.cron = cron
        self.metrics.add_dict_source("vikingbot_cron", lambda: cron.metrics)
        self._spawn("cron", lambda: cron.run_forever(self.stop_event), "")
        self.say("✓ Cron: scheduler running")

        from vikingbot.housekeeping.service import HousekeepingService

        self.housekeeping = HousekeepingService(
            cfg,
            store=self.rt.store,
            sessions=self.rt.sessions,
            workspaces=self.rt.workspaces,
            clock=self.rt.clock,
            owner=self.registry.id if self.registry is not None else None,
        )
        self.metrics.add_dict_source("vikingbot_housekeeping", lambda: self.housekeeping.metrics)
        self._spawn("housekeeping", lambda: self.housekeeping.run_forever(self.stop_event), "")
        self.say("✓ Housekeeping: index, prune, consolidate")
        self._spawn("config-watch", self._watch_config, "")

    async def _warm_agent(self) -> None:
        """Warm the agent loop now (a provider SDK, an agent process), not in the first turn."""
        try:
            await self.rt.agent().start()
        except VikingbotError as exc:
            logger.warning("agent not ready: {}", exc)

    async def _inbound_loop(self, max_parallel: int = 8) -> None:
        """Answer chat messages: chats run in parallel, one turn at a time per session
        (the loop's session lock), at most ``max_parallel`` turns at once."""
        sem = asyncio.Semaphore(max_parallel)
        while not self.stop_event.is_set():
            get = asyncio.create_task(self.rt.bus.next_inbound())
            stop = asyncio.create_task(self.stop_event.wait())
            done, _ = await asyncio.wait({get, stop}, return_when=asyncio.FIRST_COMPLETED)
            if get not in done:
                get.cancel()
                break
            stop.cancel()
            msg = get.result()

            async def answer(msg: Any = msg) -> None:
                async with sem:
                    try:
                        await self.dispatch.answer(msg)
                    except Exception:
                        logger.exception("answering {}:{} failed", msg.channel, msg.chat_id)
                        return
                    if self.channels is not None:  # a kept message is not answered again
                        await self.channels.answered(msg)

            task = asyncio.create_task(answer(), name=f"inbound:{msg.channel}:{msg.chat_id}")
            self._inbound_tasks.add(task)
            task.add_done_callback(self._inbound_tasks.discard)
        # stop taking work; turns already running get the shutdown grace period
        if self._inbound_tasks:
            await asyncio.wait(set(self._inbound_tasks))

    def _stat_config(self) -> None:
        try:
            self._config_mtime = self.rt.paths.config_file.stat().st_mtime_ns
        except OSError:
            self._config_mtime = None

    async def _watch_config(self) -> None:
        """Apply edits of the config file without a restart (bad edits keep the old config).

        File system events (``vikingbot.watch``) wake it at once; without them (or
        when they stop) it stats the file every ``config_poll_s``.
        """
        from vikingbot.watch import Watcher

        path = self.rt.paths.config_file
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        watcher = Watcher(
            [path.parent],
            name="config",
            accept=lambda p: os.path.basename(p) == path.name,
            on_change=lambda: loop.call_soon_threadsafe(changed.set),
        )
        await asyncio.to_thread(watcher.start)
        try:
            while not self.stop_event.is_set():
                timeout = 60.0 if watcher.running else self.config_poll_s
                stop = asyncio.ensure_future(self.stop_event.wait())
                woke = asyncio.ensure_future(changed.wait())
                await asyncio.wait({stop, woke}, timeout=timeout, return_when="FIRST_COMPLETED")
                for task in (stop, woke):
                    task.cancel()
                changed.clear()
                watcher.drain()
                before = self._config_mtime
                self._stat_config()
                if self._config_mtime == before or self.stop_event.is_set():
                    continue
                await self.reload_config()
        finally:
            await asyncio.to_thread(watcher.stop)

    async def reload_config(self) -> None:
        """Re-read the config file now (the watcher, and the dashboard after an edit)."""
        self._stat_config()
        try:
            config, _ = await asyncio.to_thread(
                load_config, self.rt.paths.config_file, create=False, environ=self.rt.environ
            )
        except ConfigError as exc:
            logger.error("config change not applied: {}", exc)
            return
        old = self.rt.config.bot.heartbeat
        self.rt.reconfigure(config)
        new = config.bot.heartbeat
        if old.enabled != new.enabled or old.interval_seconds != new.interval_seconds:
            state = f"every {new.interval_seconds}s" if new.enabled else "disabled"
            self.say(f"↻ Heartbeat: {state}")
        if self.heartbeat is not None:
            self.heartbeat.wake()
        logger.info("config reloaded from {}", self.rt.paths.config_file)

    # ------------------------------------------------------------ http

    def _agent_health(self) -> dict[str, Any]:
        """The loop's own readiness: ``ready`` is false for a provider that cannot work."""
        r = self.rt.readiness()
        return {"loop": self.rt.config.bot.agents.loop, "ready": r.ready, "problem": r.problem}

    def health(self) -> dict[str, Any]:
        hb_away = self.heartbeat is not None and self.heartbeat.store_down_since is not None
        store_ok = self.store_error is None and not hb_away
        return {
            "status": "ok" if store_ok else "degraded",
            "database": {"reachable": store_ok, "error": self.store_error},
            "version": __version__,
            "started_at": self.started_at.isoformat(),
            "services": {
                n: {"running": s.running, "detail": s.detail} for n, s in self.services.items()
            },
            "heartbeat": {
                "enabled": self.rt.config.bot.heartbeat.enabled,
                "interval_seconds": self.rt.config.bot.heartbeat.interval_seconds,
            },
            "agent": self._agent_health(),
            "gateway_id": self.registry.id if self.registry is not None else None,
            "gateways": self.peers,
        }

    def _publish(self) -> None:
        """Write run/gateway.json (pid, address) once the port is bound and before it
        is served: a client finding the address refused while our pid lives knows the
        gateway is starting (gateway/client.py waits a moment) rather than absent."""
        from vikingbot.gateway.lock import GatewayInfo

        self.home_lock.publish(
            GatewayInfo(os.getpid(), self.host, self.port, self.started_at.isoformat(), __version__)
        )

    def _control_ops(self) -> Any:
        from vikingbot.delivery.inbox import Inbox
        from vikingbot.gateway.ops import ControlOps

        return ControlOps(
            heartbeat=self.heartbeat,
            inbox=Inbox(self.rt.store, self.rt.clock),
            config_file=self.rt.paths.config_file,
            workspace_root=self.rt.paths.workspace_root,
            agent_problem=lambda: self.rt.readiness().problem,
            wake_heartbeat=self._wake_heartbeat,
            cron=self.cron,
            chat_turn=self.dispatch.chat,
            services=lambda: self.health()["services"],
            started_at=self.started_at.isoformat(),
            host=self.host,
            port=self.port,
        )

    def _wake_heartbeat(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.wake()

    def _audit_control(self, peer: str, path: str, reason: str) -> None:
        self.rt.store.audit(
            f"peer:{peer}", "control.auth", path, "refused", reason=reason, details={"peer": peer}
        )

    def _dashboard_routes(self) -> list[Any]:
        """The web dashboard (/ui), built from the gateway's own parts; its actions go
        through the same ControlOps as the control API."""
        from vikingbot.dashboard import DashboardParts, dashboard_routes
        from vikingbot.gateway.lock import SECRET_FILE, run_dir

        rt = self.rt

        async def run_turn(prompt: str, key: Any, meta: dict[str, Any]) -> Any:
            """A chat turn in a dashboard slot: what the agent sends to "this chat" with
            the message tool lands in the slot; other targets go through delivery."""
            import functools

            from vikingbot.delivery.adapter import ChatDelivery
            from vikingbot.delivery.inbox import Inbox

            async def to_slot(text: str) -> Any:
                add = functools.partial(Inbox(rt.store, rt.clock).add, key.chat_id, text)
                await asyncio.to_thread(add, source=f"message:{key.chat_id}")
                return "inboxed"

            deliver = ChatDelivery(rt.delivery, session=key, sink=to_slot)
            return await rt.agent().run_turn(prompt, key, meta, deliver=deliver)

        parts = DashboardParts(
            store=rt.store,
            clock=rt.clock,
            config=lambda: rt.config,
            config_file=rt.paths.config_file,
            workspace_root=rt.paths.workspace_root,
            secret_file=run_dir(rt.paths.home) / SECRET_FILE,
            heartbeat=self.heartbeat,
            sessions=rt.sessions,
            health=self.health,
            agent_problem=lambda: rt.readiness().problem,
            run_turn=run_turn,
            apply_config=self.reload_config,
            ops=self.ops,
            stopping=self.stop_event,
        )
        return dashboard_routes(parts)

    async def _start_http(self) -> Any:
        import uvicorn

        from vikingbot.gateway.control import ControlGuard, control_routes
        from vikingbot.gateway.server import build_app

        routes: list[Any] = list(self.channels.routes()) if self.channels is not None else []
        channel_prefixes = tuple(f"{route.path}/" for route in routes)
        self.ops = self._control_ops()
        routes.extend(control_routes(self.ops))
        routes += self._dashboard_routes()
        token = self.rt.config.bot.gateway.token
        token_text = token.get_secret_value() if token else None
        app = build_app(
            health=self.health,
            metrics=self.metrics.render,
            token=token_text,
            extra_routes=routes,
            self_authenticating=(*channel_prefixes, "/api/", "/ui/"),
        )
        app = ControlGuard(
            app, secret=self.home_lock.secret, token=token_text, audit=self._audit_control
        )
        config = uvicorn.Config(
            app, host=self.host, port=self.port, log_config=None, access_log=False, lifespan="off"
        )
        server = _QuietServer(config)
        task = self._server_task = asyncio.create_task(server.serve(sockets=[self._sock]))
        while not server.started:
            if task.done():
                exc = task.exception()
                raise ConfigError(
                    f"cannot listen on {self.host}:{self.port}: {exc or 'address in use?'}"
                )
            await asyncio.sleep(0.02)
        return server


class _QuietServer:
    """uvicorn's Server without its own signal handling (the gateway owns signals)."""

    def __new__(cls, config: Any) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Any:
                yield

            async def main_loop(self) -> None:
                # uvicorn wakes 10 times a second; once a second is plenty for an idle
                # laptop gateway (the Date header still refreshes every tick).
                # The gateway's stop wakes it at once (``wake``), not at the next tick.
                self.wake = asyncio.Event()
                counter = 0
                should_exit = await self.on_tick(counter)
                while not should_exit:
                    counter = (counter + 10) % 864000
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.wake.wait(), 1.0)
                    should_exit = await self.on_tick(counter)

        return Server(config)


class _LazyAgent:
    """The agent loop, built on the first turn (so a gateway with no provider still starts)."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    async def run_turn(
        self,
        prompt: str,
        session_key: Any,
        metadata: dict[str, Any] | None = None,
        *,
        deliver: Any = None,
    ) -> Any:
        return await self._rt.agent().run_turn(prompt, session_key, metadata, deliver=deliver)
