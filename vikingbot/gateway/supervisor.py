"""The gateway: starts what the composition root builds, supervises, serves, stops.

Every part is built in ``gateway/compose.py`` (read it to see the gateway); the
services run under ``gateway/services.py`` (a crash is logged, told to the owner
once and restarted with backoff). On SIGINT/SIGTERM the gateway stops taking work,
gives running turns ``bot.gateway.shutdown_grace_s`` to finish, cancels what is
left and flushes state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot import __version__, agentio
from vikingbot.config.loader import dotenv_files, load_config
from vikingbot.errors import ConfigError, VikingbotError
from vikingbot.fsutil import disk_problem
from vikingbot.gateway import compose
from vikingbot.gateway.peers import is_loopback
from vikingbot.gateway.registry import Membership
from vikingbot.gateway.reload import ConfigWatch
from vikingbot.gateway.server import QuietServer
from vikingbot.gateway.services import Services
from vikingbot.gateway.threads import ThreadProbe
from vikingbot.metrics import Metrics

if TYPE_CHECKING:
    from vikingbot.channels.manager import ChannelManager
    from vikingbot.config.schema import Config
    from vikingbot.cron.service import CronService
    from vikingbot.gateway.applying import Report
    from vikingbot.gateway.dispatch import Dispatcher
    from vikingbot.gateway.lock import HomeLock
    from vikingbot.gateway.ops import ControlOps
    from vikingbot.gateway.registry import GatewayRegistry
    from vikingbot.heartbeat.service import HeartbeatService
    from vikingbot.housekeeping.service import HousekeepingService

Say = Callable[[str], None]
CANCEL_WAIT_S = 1.0  # how long cancelled work and channels get to wind down
SIGTERM_ECHO_S = 2.0  # a second SIGTERM this soon is the first one forwarded again


class Gateway:
    def __init__(
        self,
        home: compose.Home,
        *,
        host: str | None = None,
        port: int | None = None,
        say: Say = print,
        config_poll_s: float = 2.0,
    ) -> None:
        self.home = home  # the config's owner (reloads); services get only their parts
        gw = home.config.bot.gateway
        self.host = host or gw.host
        self.port = port if port is not None else gw.port
        self.say = say
        self.metrics = Metrics()
        self.stop_event = asyncio.Event()
        self._first_signal: tuple[int, float] | None = None
        self.services = Services(self.stop_event, tell=self._tell, forget=self._forget)
        self.threads = ThreadProbe()
        self.started_at = datetime.now(UTC)
        self.config_watch = ConfigWatch(
            home.paths.config_file,
            load=self._load_config,
            apply=self._apply_config,
            also=dotenv_files(home.paths.home),
            poll_s=config_poll_s,
        )
        self._dispatch: Dispatcher | None = None
        self.registry: GatewayRegistry | None = None
        self.channels: ChannelManager | None = None
        self.heartbeat: HeartbeatService | None = None
        self.cron: CronService | None = None
        self.housekeeping: HousekeepingService | None = None
        self.home_lock: HomeLock | None = None
        self.ops: ControlOps | None = None
        self._server_task: asyncio.Task[Any] | None = None
        self._close_mcp: Callable[[], Awaitable[None]] | None = None
        self._sock: Any = None  # the HTTP port, bound at start (bind_port), served later
        self.membership: Membership | None = None  # this gateway in the registry (beats)
        self._started_config = home.config  # keys read only at start are compared to it
        self._agent_said = ""  # the agent's readiness line printed last

    @property
    def dispatch(self) -> Dispatcher:
        """Chat and dashboard turns."""
        if self._dispatch is None:
            self._dispatch = compose.dispatch(self.home)
        return self._dispatch

    async def _tell(self, key: str, text: str) -> bool:
        tell, _ = compose.crash_notices(self.home)
        return bool(await tell(key, text))

    async def _forget(self, key: str) -> bool:
        _, forget = compose.crash_notices(self.home)
        return bool(await forget(key))

    # ------------------------------------------------------------ lifecycle

    def check_bind(self) -> None:
        token = self.home.config.bot.gateway.token
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

    def take_home(self) -> HomeLock:
        """Hold the home (one gateway per home on the embedded store); see gateway/lock.py."""
        from vikingbot.gateway.lock import HomeLock, needs_home_lock

        self.home_lock = lock = HomeLock(
            self.home.paths.home, exclusive=needs_home_lock(self.home.paths.database_url)
        )
        lock.acquire()
        return lock

    async def run(self) -> int:
        self.check_bind()
        lock = self.home_lock if self.home_lock is not None else self.take_home()
        try:
            return await self._run()
        finally:
            if self._sock is not None:
                self._sock.close()
            lock.release()

    async def _run(self) -> int:
        self.bind_port()
        self._publish()  # before serving: a client that can connect can also find us
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.request_stop, sig)
        self.say(f"vikingbot {__version__} gateway")
        self.say(f"  config: {self.home.paths.config_file}")
        self.say(f"  data:   {self.home.paths.data_dir}")
        if self._say_agent():
            self._warm()
        await asyncio.to_thread(lambda: self.home.store)  # open + migrate it before serving
        self.config_watch.stat()

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
        """First signal: stop gracefully (bounded, see _shutdown). Second: exit now.

        A SIGTERM that follows the first within ``SIGTERM_ECHO_S`` is the same request:
        a supervisor that signals the process group (systemd, a terminal closing, a
        `timeout` under `uv run`) reaches us directly and once more through `uv`, which
        forwards it. Ctrl-C twice still exits at once.
        """
        now = time.monotonic()
        if sig == signal.SIGTERM and self._first_signal is not None:
            first_sig, first_at = self._first_signal
            if first_sig == signal.SIGTERM and now - first_at < SIGTERM_ECHO_S:
                logger.debug(
                    "SIGTERM again {:.3f} s after the first: the same request", now - first_at
                )
                return
        if sig is not None and self._first_signal is None:
            self._first_signal = (sig, now)
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
        deadline = loop.time() + self.home.config.bot.gateway.shutdown_grace_s
        for svc in (self.heartbeat, self.housekeeping):
            if svc is not None and hasattr(svc, "stop"):
                svc.stop()
        tasks = self.services.tasks()
        tasks |= set(self.dispatch.inflight)  # chat turns
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
        if self._close_mcp is not None:
            await self._close_mcp()  # the MCP server's transport task group
        if self.membership is not None:
            await self.membership.leave()
        await self.home.aclose()
        if self.home.config.bot.telemetry.otlp_endpoint:
            from vikingbot import telemetry

            await asyncio.to_thread(telemetry.shutdown)  # the last spans are sent

    # ------------------------------------------------------------ services

    async def _start_services(self) -> None:
        """Build (compose.py) and start every service, in order; each runs supervised."""
        home, stop, spawn = self.home, self.stop_event, self.services.spawn
        tel = home.config.bot.telemetry
        if tel.otlp_endpoint:  # traces (docs/telemetry.md); no OpenTelemetry import when off
            from vikingbot import telemetry

            on = telemetry.configure(
                tel.otlp_endpoint, with_content=tel.content, service=tel.service_name
            )
            self.say(f"{'✓' if on else '✗'} Traces: {tel.otlp_endpoint}")
        # join the gateways registry (several gateways may share a PostgreSQL store)
        self.registry = registry = compose.registry(home, f"{self.host}:{self.port}")
        beat_s = home.config.bot.gateway.lease_s / 2  # several gateways: scaling.md
        self.membership = member = Membership(registry, self._held, beat_s=beat_s)
        await member.join()
        spawn("registry", lambda: member.run(stop), f"gateway id {registry.id}")
        owner = registry.id
        # channels first: heartbeat results need somewhere to go
        self.channels = manager = compose.channels(home, owner or "", self._spawn_for_channels)
        self.metrics.add_dict_source("vikingbot_outbox", lambda: manager.metrics)
        try:
            await manager.start()
            for row in manager.status():
                if row.get("enabled"):
                    mark = "✓" if row.get("running") else "✗"
                    err = f" ({row['last_error']})" if row.get("last_error") else ""
                    self.say(f"{mark} Channel {row['name']}{err}")
        except VikingbotError as exc:
            self.say(f"✗ Channels: {exc}")
        steering = self.dispatch.steering
        if steering is not None:  # chats ask approvals, show typing, list the commands
            steering.channel_of = manager.channel
            names = [row["name"] for row in manager.status() if row.get("running")]
            running = [c for n in names if (c := manager.channel(n)) is not None]
            spawn("menus", lambda: steering.register_menus(running), "command menus", restart=False)
        spawn(
            "inbound",
            lambda: self.dispatch.serve_inbound(
                home.bus, stop, answering=manager.answering, answered=manager.answered
            ),
            "chat messages",
        )
        spawn("dashboard", lambda: self.dispatch.dashboard_prompts(stop), "dashboard prompts")

        hub = self.home.mcp  # the MCP servers: one session each, shared by every turn
        hub.on_problem = compose.mcp_notices(home)
        home.tell_outages(compose.outage_notices(home))  # a model down, a fallback answering
        if hub.configured:
            spawn("mcp-eager", hub.start_eager, "MCP servers with eager: true", restart=False)
            self.say(f"✓ MCP: {len(hub.servers(unattended=False))} server(s), started on first use")

        self.heartbeat = hb_svc = compose.heartbeat(home, metrics=self.metrics)
        spawn("heartbeat", lambda: hb_svc.run_forever(stop), "")
        hb = home.config.bot.heartbeat
        if hb.enabled:
            self.say(f"✓ Heartbeat: every {hb.interval_seconds}s ({hb.mode}){self._hours()}")
        else:
            self.say("✗ Heartbeat: disabled (vikingbot heartbeat enable)")

        self.cron = cron = compose.cron(home, owner)
        self.metrics.add_dict_source("vikingbot_cron", lambda: cron.metrics)
        spawn("cron", lambda: cron.run_forever(stop), "")
        self.say("✓ Cron: scheduler running")

        self.housekeeping = hk = compose.housekeeping(home, owner)
        self.metrics.add_dict_source("vikingbot_housekeeping", lambda: hk.metrics)
        spawn("housekeeping", lambda: hk.run_forever(stop), "")
        self.say("✓ Housekeeping: index, prune, consolidate")
        spawn("config-watch", lambda: self.config_watch.watch(stop), "")
        spawn("thread-probe", lambda: self.threads.run(stop), "the gateway's worker threads")

    def _held(self) -> list[str]:
        return self.channels.held() if self.channels is not None else []

    def _spawn_for_channels(
        self, name: str, factory: Callable[[], Awaitable[Any]]
    ) -> asyncio.Task[Any]:
        """The channel manager's loops, supervised (the manager cancels them on stop)."""
        state = self.services.spawn(name, factory, "channels", awaited_on_stop=False)
        assert state.task is not None
        return state.task

    async def _warm_agent(self) -> None:
        """Warm the agent loop now (a provider SDK, an agent process), not in the first turn."""
        try:
            await self.home.agent().start()
        except VikingbotError as exc:
            logger.warning("agent not ready: {}", exc)

    def _load_config(self) -> Config:
        """The config as the files are now: the ``.env`` files first (their variables
        reach the agent, its providers, checkers and MCP servers), then the config file."""
        if self.home.reread_environ():
            logger.info("environment re-read from the .env files")
        environ = self.home.environ
        return load_config(self.home.paths.config_file, create=False, environ=environ)[0]

    async def _apply_config(self, config: Config, generation: int) -> Report:
        """A reloaded config: the parts that read it at run time get it, the channels
        follow it (started, stopped, restarted), the heartbeat wakes to act on it now;
        what changed is printed, and what waits for a restart is reported."""
        from vikingbot.gateway.applying import RESTART_HINT, Report, needs_restart

        old = self.home.config.bot.heartbeat
        self.home.reconfigure(config)
        new = config.bot.heartbeat
        if (old.enabled, old.interval_seconds, old.active_hours) != (
            new.enabled,
            new.interval_seconds,
            new.active_hours,
        ):
            state = f"every {new.interval_seconds}s{self._hours()}" if new.enabled else "disabled"
            self.say(f"↻ Heartbeat: {state}")
        if self._say_agent():  # ready now: the first chat does not load the SDK
            self._warm()
        if self.heartbeat is not None:
            self.heartbeat.wake()
        report = Report(generation, applied=True)
        if self.channels is not None:
            verb = {"start": "started", "stop": "stopped", "restart": "restarted"}
            for done in await self.channels.apply(config):
                report.channels.append(done._asdict())
                if done.ok:
                    self.say(f"↻ Channel {done.channel}: {verb[done.action]}")
                else:
                    self.say(f"✗ Channel {done.channel}: did not start ({done.error})")
        report.restart_needed = needs_restart(self._started_config, config)
        if report.restart_needed:
            keys = ", ".join(report.restart_needed)
            self.say(f"! Config: {keys} changed: {RESTART_HINT}")
        return report

    def _say_agent(self) -> bool:
        """Print the agent's readiness when it differs from what was printed last;
        True when it is ready now and was not (or at start)."""
        ready = self.home.readiness()
        if ready.ready:
            line = f"✓ Agent: ready, {self.home.config.bot.agents.loop}: {ready.detail}"
        else:
            line = f"✗ Agent: {ready.problem}"
        was_ready = self._agent_said.startswith("✓")
        if line != self._agent_said:
            self._agent_said = line
            self.say(line)
        return ready.ready and not was_ready

    def _warm(self) -> None:
        self.services.spawn(
            "agent-warmup", self._warm_agent, "loading the model SDK", restart=False
        )

    async def reload_config(self) -> Report:
        """Re-read the config file now (the dashboard after an edit, ``config set``)."""
        return await self.config_watch.reload()

    async def _reload_for_api(self) -> dict[str, Any]:
        return (await self.reload_config()).as_dict()

    def _hours(self) -> str:
        """``", active 08:00–22:00 Europe/Paris"`` (and whether it is quiet now) for the
        heartbeat's start line; "" without an active-hours window."""
        window = self.heartbeat.active_window() if self.heartbeat is not None else None
        if window is None:
            return ""
        quiet = self.heartbeat is not None and (
            self.heartbeat.global_skip("scheduled", False) == "quiet-hours"
        )
        now = f"; quiet now, the first cycle at {window[0]}" if quiet else ""
        return f", active {window[0]}–{window[1]} {window[2]}{now}"

    # ------------------------------------------------------------ http

    def _agent_health(self) -> dict[str, Any]:
        """The loop's own readiness: ``ready`` is false for a provider that cannot work."""
        r = self.home.readiness()
        loop = self.home.config.bot.agents.loop
        running = self.home.agent().subagents() if r.ready else []  # spawn (docs/agent.md)
        down = self.home.models_down()  # models with an outage (a fallback answers)
        return {
            "loop": loop,
            "ready": r.ready,
            "problem": r.problem,
            "detail": r.detail,
            "subagents": running,
            "models_down": down,
        }

    def problems(self) -> list[str]:
        """Why the gateway is ``degraded`` now, one reason a line (empty: ``ok``)."""
        found: list[str] = []
        hb = self.heartbeat
        store_error = self.membership.store_error if self.membership is not None else None
        if store_error is not None and disk_problem(store_error):
            found.append(f"disk full: {disk_problem(store_error)} ({store_error})")
        elif store_error is not None:
            found.append(f"database unreachable: {store_error}")
        elif hb is not None and hb.store_down_since is not None:
            found.append(f"database unreachable since {hb.store_down_since:%H:%M:%S} UTC")
        if hb is not None and hb.health.down_since is not None:
            found.append(f"model provider down: {hb.health.error or 'no answer'}")
        found += self.services.problems()
        found += self.threads.problems() + agentio.problems()
        found += self.home.mcp.problems()
        if self.channels is not None:
            for row in self.channels.status():
                if row.get("enabled") and not row.get("running"):
                    found.append(f"channel {row['name']} not running: {row.get('last_error')}")
                elif row.get("enabled") and row.get("failing"):
                    found.append(f"channel {row['name']} degraded: {row['failing']}")
        found += self._config_problems()
        return found

    def _config_problems(self) -> list[str]:
        """A reload that failed, and keys that wait for a restart (gateway/applying.py)."""
        from vikingbot.gateway.applying import RESTART_HINT

        last = self.config_watch.last
        if last is None:
            return []
        if last.error:
            return [f"config change not applied: {last.error}"]
        if last.restart_needed:
            keys = ", ".join(last.restart_needed)
            return [f"in the config, not running: {keys} ({RESTART_HINT})"]
        return []

    def health(self) -> dict[str, Any]:
        problems = self.problems()
        store_ok = not any(p.startswith("database unreachable") for p in problems)
        cfg = self.home.config.bot
        return {
            "status": "degraded" if problems else "ok",
            "problems": problems,
            "database": {
                "reachable": store_ok,
                "error": self.membership.store_error if self.membership is not None else None,
            },
            "version": __version__,
            "started_at": self.started_at.isoformat(),
            "services": self.services.health(),
            "heartbeat": {
                "enabled": cfg.heartbeat.enabled,
                "interval_seconds": cfg.heartbeat.interval_seconds,
            },
            "agent": self._agent_health(),
            "config": self._config_health(),
            "mcp": [s._asdict() for s in self.home.mcp.status()],
            "channels": self.channels.status() if self.channels is not None else [],
            "gateway_id": self.registry.id if self.registry is not None else None,
            "gateways": self.membership.peers if self.membership is not None else [],
        }

    def _config_health(self) -> dict[str, Any]:
        last = self.config_watch.last
        return {
            "generation": self.config_watch.generation,
            "error": last.error if last is not None else None,
            "restart_needed": last.restart_needed if last is not None else [],
        }

    async def health_now(self) -> dict[str, Any]:
        """``/health``: :meth:`health` with the gateways' rows read now."""
        found = self.health()
        if self.membership is not None:
            found["gateways"] = await self.membership.read_peers()
        return found

    def _publish(self) -> None:
        """Write run/gateway.json (pid, address) once the port is bound and before it
        is served: a client finding the address refused while our pid lives knows the
        gateway is starting (gateway/client.py waits a moment) rather than absent."""
        from vikingbot.gateway.lock import GatewayInfo

        assert self.home_lock is not None
        self.home_lock.publish(
            GatewayInfo(os.getpid(), self.host, self.port, self.started_at.isoformat(), __version__)
        )

    def _wake_heartbeat(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.wake()

    def _audit_control(self, peer: str, path: str, reason: str) -> None:
        self.home.store.audit(
            f"peer:{peer}", "control.auth", path, "refused", reason=reason, details={"peer": peer}
        )

    async def _start_http(self) -> Any:
        import uvicorn

        from vikingbot.gateway.webguard import deadline_protocol

        assert self.home_lock is not None and self.home_lock.secret is not None
        assert self.heartbeat is not None
        home = self.home
        self.ops = ops = compose.control_ops(
            home,
            heartbeat=self.heartbeat,
            cron=self.cron,
            chat=self.dispatch,
            wake_heartbeat=self._wake_heartbeat,
            services=self.services.health,
            started_at=self.started_at.isoformat(),
            host=self.host,
            port=self.port,
            reload_config=self._reload_for_api,
        )
        if self.dispatch.steering is not None:
            self.dispatch.steering.heartbeat = ops  # /heartbeat plan|run|pause|resume
        dashboard = compose.dashboard_routes(
            home,
            heartbeat=self.heartbeat,
            health=self.health,
            apply_config=self.reload_config,
            ops=ops,
            stopping=self.stop_event,
            take_files=partial(self.dispatch.files_in, source="dashboard"),
        )
        mcp_routes, self._close_mcp = compose.mcp_http(home, ops=ops)
        app = compose.http_app(
            home,
            channel_routes=list(self.channels.routes()) if self.channels is not None else [],
            ops=ops,
            dashboard=dashboard,
            health=self.health_now,
            metrics=self.metrics,
            secret=self.home_lock.secret,
            audit=self._audit_control,
            doors=[*compose.openai_api(home, inflight=ops.inflight), *mcp_routes],
        )
        web = home.config.bot.gateway
        config = uvicorn.Config(
            app,
            host=self.host,
            port=self.port,
            log_config=None,
            access_log=False,
            lifespan="off",
            http=deadline_protocol(web.head_timeout_s, web.body_timeout_s),
        )
        server = QuietServer(config)
        task = self._server_task = asyncio.create_task(server.serve(sockets=[self._sock]))
        while not server.started:
            if task.done():
                exc = task.exception()
                raise ConfigError(
                    f"cannot listen on {self.host}:{self.port}: {exc or 'address in use?'}"
                )
            await asyncio.sleep(0.02)
        return server
