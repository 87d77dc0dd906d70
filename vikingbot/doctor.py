"""`vikingbot doctor`: is this home set up to work, and if not, what to do.

Each check returns ``Check`` lines: ``ok`` (✓), ``warn`` (!: works, but look) or
``fail`` (✗: something will not work). Nothing here calls a model unless
``live`` is asked for; ``fix`` does only what is safe (create the default
workspace and its template, the config file, apply migrations, tighten the
permissions of secrets) and every fix says what it did.
"""

from __future__ import annotations

import asyncio
import functools
import os
import stat
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vikingbot.errors import VikingbotError

if TYPE_CHECKING:
    from vikingbot.config.loader import Paths
    from vikingbot.config.schema import Config
    from vikingbot.gateway.client import GatewayClient

Status = Literal["ok", "warn", "fail"]
MARKS: dict[Status, str] = {"ok": "✓", "warn": "!", "fail": "✗"}
LIVE_CHANNEL_S = 20.0  # how long --live waits for a chat platform
LIVE_PROMPT = "This is a connection test from `vikingbot doctor`. Reply with the word OK."
LIVE_SESSION = "doctor:live:agent"  # a system session: no listing shows it (session/store.py)
LIVE_TIMEOUT_S = 60


@dataclass
class Check:
    name: str
    status: Status
    message: str
    fixed: str | None = None  # what --fix did, when it did something

    def as_dict(self) -> dict[str, str | None]:
        return asdict(self)


def run(
    config_opt: Path | None = None,
    *,
    live: bool = False,
    fix: bool = False,
    environ: Mapping[str, str] | None = None,
) -> list[Check]:
    """Every check, in the order shown."""
    from vikingbot.config.loader import home_environ, load_config
    from vikingbot.config.paths import config_path, home_dir

    env = dict(os.environ if environ is None else environ)
    home, path = home_dir(env), config_path(config_opt, env)
    checks: list[Check] = []
    config: Config | None = None
    paths: Paths | None = None
    try:
        existed = path.exists()
        config, paths = load_config(config_opt, create=fix, environ=env)
        if existed:
            checks.append(Check("config", "ok", f"{path} is valid"))
        elif fix:
            checks.append(Check("config", "ok", f"{path} is valid", f"created {path}"))
        else:
            checks.append(
                Check("config", "warn", f"no file at {path}: defaults apply (--fix writes it)")
            )
    except VikingbotError as exc:
        checks.append(Check("config", "fail", str(exc)))
    if config is not None and paths is not None:
        full_env = home_environ(paths.home, env)
        gateway, health, client = _gateway(paths)
        if live and client is not None and health is not None:
            running = _live_via_gateway(client, health, gateway)
        else:
            running = _running_agent(health, gateway) if not live else None
        checks.append(running or _agent(config, paths, full_env, live, gateway=health is not None))
        checks += _heartbeat_model(config, full_env)
        checks += _channels(config, live)
        checks += _drift(config, health)
        checks += _mcp(config, paths, full_env)
        checks += _workspaces(config, paths, fix)
        checks += _checkers(config, paths, full_env)
        checks += _skills(config, paths)
        checks.append(_timezone(config))
        checks.append(_database(paths, fix))
        checks.append(gateway)
    checks += _permissions(home, path, fix)
    if config is not None and paths is not None:  # last: earlier lines keep their places
        checks += _web_search(config, home_environ(paths.home, env), live)
    return checks


def failed(checks: list[Check]) -> bool:
    return any(c.status == "fail" for c in checks)


# ---------------------------------------------------------------- agent


def _running_agent(health: dict[str, Any] | None, gateway: Check) -> Check | None:
    """The running gateway's own answer about its agent (its environment and config,
    which may differ from this shell's); None when no gateway answered."""
    agent = health.get("agent") if health is not None else None
    if not isinstance(agent, dict):
        return None
    where = f"in the running gateway ({_pid_at(gateway)})"
    name = agent.get("loop") or "agent"
    if agent.get("ready"):
        return Check("agent", "ok", f"{name}: ready {where} (no call made)")
    return Check("agent", "fail", f"{name}: {agent.get('problem') or 'not ready'} {where}")


def _pid_at(gateway: Check) -> str:
    """``pid 4242 at http://...`` from the gateway's row."""
    return gateway.message.removeprefix("running, ")


def _live_via_gateway(
    client: GatewayClient, health: dict[str, Any], gateway: Check
) -> Check | None:
    """``--live`` with a gateway running: one short turn through it (its agent, config
    and key are what is tested), in the doctor's own session; None when the gateway
    does not say what its agent is (then this shell's is tried)."""
    ready = _running_agent(health, gateway)
    if ready is None or ready.status != "ok":
        return ready
    agent = health["agent"]
    name, detail = agent.get("loop") or "agent", agent.get("detail") or "ready"
    where = f"through the running gateway ({_pid_at(gateway)})"
    try:
        answer = client.post(
            "/api/v1/chat",
            {"text": LIVE_PROMPT, "session": LIVE_SESSION},
            timeout=LIVE_TIMEOUT_S + 30,
        )
    except (VikingbotError, OSError, ValueError) as exc:
        return Check("agent", "fail", f"{name}: {detail}: live call {where} failed: {exc}")
    text = answer.get("reply") if isinstance(answer, dict) else None
    error = answer.get("error") if isinstance(answer, dict) else "not a chat answer"
    return _live_result(name, detail, text, error, where)


def _agent(
    config: Config, paths: Paths, env: Mapping[str, str], live: bool, *, gateway: bool = False
) -> Check:
    """The agent as this shell's environment would run it (``gateway``: one runs, and
    what it has may differ: said in the detail)."""
    check = _local_agent(config, paths, env, live)
    if gateway:
        note = "checked in this shell's environment, not the running gateway's"
        return Check(check.name, check.status, f"{check.message} ({note})", check.fixed)
    return check


def _local_agent(config: Config, paths: Paths, env: Mapping[str, str], live: bool) -> Check:
    from vikingbot import registry
    from vikingbot.agent.types import AgentLoop
    from vikingbot.session.store import SessionStore
    from vikingbot.workspace.manager import WorkspaceManager

    name = config.bot.agents.loop
    try:
        loop_cls: type[AgentLoop] = registry.load_ready("loops", name)
        loop = loop_cls(
            config,
            sessions=SessionStore(paths.sessions_dir),
            workspaces=WorkspaceManager(paths.workspace_root, config.bot.sandbox.mode),
            environ=env,
        )
        ready = loop.readiness()
    except VikingbotError as exc:
        return Check("agent", "fail", f"{name}: {exc}")
    if not ready.ready:
        return Check("agent", "fail", f"{name}: {ready.problem}")
    if not live:
        return Check("agent", "ok", f"{name}: {ready.detail or 'ready'} (no call made)")
    return _live_call(loop, name, ready.detail)


def _heartbeat_model(config: Config, env: Mapping[str, str]) -> list[Check]:
    """When heartbeat turns have a provider or model of their own: can it answer?"""
    from vikingbot.providers.factory import create_provider

    hb, agents = config.bot.heartbeat, config.bot.agents
    if not (hb.provider or hb.model):
        return []
    what = "heartbeat model"
    if agents.loop != "builtin":
        return [
            Check(
                what,
                "warn",
                f"bot.heartbeat.provider/model apply to the builtin loop; the {agents.loop} "
                "loop answers heartbeat turns with its own agent",
            )
        ]
    name, model = hb.provider or agents.provider, hb.model or agents.model
    try:
        provider = create_provider(config, env, name=name)
    except VikingbotError as exc:
        return [Check(what, "fail", str(exc))]
    problem = provider.problem(model)
    if problem:
        return [Check(what, "fail", problem)]
    return [Check(what, "ok", f"{name} / {model} for heartbeat turns (no call made)")]


def _live_call(loop: object, name: str, detail: str) -> Check:
    from vikingbot.agent.types import AgentLoop
    from vikingbot.session.types import SessionKey

    assert isinstance(loop, AgentLoop)

    async def one_turn() -> tuple[str | None, str | None]:
        try:
            result = await loop.run_turn(
                LIVE_PROMPT,
                SessionKey.parse(LIVE_SESSION),
                {"unattended": True, "actor": "doctor", "timeout_s": LIVE_TIMEOUT_S},
            )
        finally:
            await loop.aclose()
        return result.text, result.error

    try:
        text, error = asyncio.run(one_turn())
    except VikingbotError as exc:
        return Check("agent", "fail", f"{name}: {detail}: live call failed: {exc}")
    return _live_result(name, detail, text, error, "")


def _live_result(name: str, detail: str, text: Any, error: Any, where: str) -> Check:
    """The agent row for a live call's reply (``where``: " through the running gateway ...")."""
    via = f" {where}" if where else ""
    if error or not isinstance(text, str) or not text:
        return Check(
            "agent", "fail", f"{name}: {detail}: live call{via} failed: {error or 'no reply'}"
        )
    reply = " ".join(text.split())[:60]
    return Check("agent", "ok", f"{name}: {detail}: live call{via} answered {reply!r}")


# ---------------------------------------------------------------- channels


def _channels(config: Config, live: bool = False) -> list[Check]:
    from vikingbot import registry

    out = []
    for name, section in config.bot.channels.sections().items():
        if not section.enabled or name == "cli":
            continue
        try:
            cls = registry.load_ready("channels", name)
            found = cls.problems(section)
        except (VikingbotError, ImportError) as exc:
            out.append(Check(f"channel {name}", "fail", f"cannot load the channel: {exc}"))
            continue
        if found.missing:
            out.append(
                Check(
                    f"channel {name}",
                    "fail",
                    f"enabled but missing {', '.join(found.missing)}: "
                    f"set bot.channels.{name}.{found.missing[0]}",
                )
            )
        elif live:
            out.append(_channel_live(name, cls, section, found.notes))
        elif found.notes:
            out.append(Check(f"channel {name}", "warn", "; ".join(found.notes)))
        else:
            out.append(Check(f"channel {name}", "ok", "credentials set"))
    return out


def _drift(config: Config, health: dict[str, Any] | None) -> list[Check]:
    """What the config has and the running gateway does not run (gateway/drift.py)."""
    from vikingbot.gateway.drift import NOT_RUNNING, drift

    if health is None:
        return []
    return [Check(d.what, "warn", f"{NOT_RUNNING}: {d.why}") for d in drift(config, health)]


def _channel_live(name: str, cls: Any, section: Any, notes: list[str]) -> Check:
    """``--live``: the channel asks its platform whether the credentials work."""
    try:
        said = asyncio.run(asyncio.wait_for(cls.check_credentials(section), LIVE_CHANNEL_S))
    except TimeoutError:
        return Check(f"channel {name}", "fail", f"no answer within {LIVE_CHANNEL_S:.0f}s")
    except VikingbotError as exc:
        return Check(f"channel {name}", "fail", str(exc))
    if said is None:
        said = "credentials set (this channel cannot check them live)"
    notes_text = "; ".join(notes)
    return Check(
        f"channel {name}", "warn" if notes else "ok", f"{said}; {notes_text}" if notes else said
    )


def _web_search(config: Config, env: Mapping[str, str], live: bool) -> list[Check]:
    """The web_search tool's backend: its key or URL (none to check for the keyless
    default); with ``--live``, one search."""
    from vikingbot.tools.search_backends import check

    cfg = config.bot.tools.web_search
    if not live and cfg.provider == "duckduckgo":
        return []
    status, message = check(cfg, env, live=live)
    return [Check("web search", status, message)]


# ---------------------------------------------------------------- workspaces


def _mcp(config: Config, paths: Paths, env: Mapping[str, str]) -> list[Check]:
    """Each enabled MCP server: started, its tools listed, stopped again (docs/mcp.md)."""
    if not config.bot.tools.mcp_servers:
        return []
    import asyncio
    import time

    from vikingbot.mcp.client import START_TIMEOUT_S
    from vikingbot.mcp.hub import McpHub

    hub = McpHub(config, environ=env, logs=paths.logs_dir, turn_wait_s=START_TIMEOUT_S)

    async def probe() -> tuple[dict[str, Any], float]:
        began = time.perf_counter()
        try:
            return await hub.tools_for(unattended=False), time.perf_counter() - began
        finally:
            await hub.aclose()

    tools, took = asyncio.run(probe())
    out = []
    for row in hub.status():
        name = f"mcp {row.name}"
        if row.state == "disabled":
            out.append(Check(name, "ok", "disabled (enabled: false)"))
        elif row.problem:
            out.append(Check(name, "fail", row.problem))
        else:
            count = sum(1 for t in tools.values() if getattr(t, "server", None) == row.name)
            out.append(Check(name, "ok", f"{count} tool(s) listed ({took:.1f} s for all)"))
    out += [Check("mcp tools", "warn", p) for p in hub.problems() if "would both be called" in p]
    return out


def _workspaces(config: Config, paths: Paths, fix: bool) -> list[Check]:
    from vikingbot.heartbeat.parser import read_heartbeat
    from vikingbot.heartbeat.skills import with_skill_problems
    from vikingbot.session.types import SessionKey
    from vikingbot.workspace.manager import WorkspaceManager

    manager = WorkspaceManager(paths.workspace_root, config.bot.sandbox.mode)
    fixed = None
    if not manager.list_workspaces():
        if not fix:
            where = paths.workspace_root
            return [Check("workspaces", "warn", f"none under {where} (--fix creates the default)")]
        try:
            made = manager.workspace_for(SessionKey("cli", "default", "local"))
        except VikingbotError as exc:
            return [Check("workspaces", "fail", str(exc))]
        fixed = f"created workspace {made} from the template"
    hb = config.bot.heartbeat
    out = []
    for ws in manager.list_workspaces():
        file = ws / "HEARTBEAT.md"
        names = functools.partial(_skill_names, ws, paths.home)
        parsed = with_skill_problems(read_heartbeat(file, hb.max_file_bytes), names)
        problems: list[tuple[int, str]] = []
        if parsed.unreadable:
            problems.append((0, f"{file}: {parsed.unreadable}"))
        problems += [(p.line, f"{file}:{p.line}: {p.message}") for p in parsed.errors]
        for e in parsed.active:
            if e.only_if and e.only_if[0] not in hb.checkers:
                problems.append(
                    (
                        e.line,
                        f"{file}:{e.line}: only-if: {e.only_if[0]} is not configured "
                        f"(add bot.heartbeat.checkers.{e.only_if[0]})",
                    )
                )
        name = f"workspace {ws.name}"
        if problems:
            out.append(Check(name, "fail", "\n  ".join(t for _, t in sorted(problems)), fixed))
        elif parsed.missing:
            out.append(Check(name, "ok", "no HEARTBEAT.md (nothing scheduled)", fixed))
        else:
            n = len(parsed.active)
            out.append(Check(name, "ok", f"HEARTBEAT.md: {n} active entries", fixed))
        fixed = None
    return out


def _checkers(config: Config, paths: Paths, env: Mapping[str, str]) -> list[Check]:
    """A checker that cannot run (bad options, a credential missing) fails open: the
    entries using it run as if there were work. Worth a warning, not a failure."""
    from vikingbot.heartbeat.checkers.runner import build_checker

    out = []
    for name, cfg in sorted(config.bot.heartbeat.checkers.items()):
        try:
            why = build_checker(name, cfg, state_dir=paths.data_dir, environ=env).missing()
        except VikingbotError as exc:
            why = str(exc)
        if why is not None:
            meanwhile = (
                "fail: closed, so entries using it do not run"
                if cfg.fail == "closed"
                else "fail-open: entries using it run as if there were work"
            )
            out.append(Check(f"checker {name}", "warn", f"{why} ({meanwhile})"))
    return out


def _skill_names(workspace: Path, home: Path) -> list[str]:
    from vikingbot.skills.discover import catalog, user_dir

    return catalog(workspace=workspace, user=user_dir(home)).names


def _skills(config: Config, paths: Paths) -> list[Check]:
    """The user's skills and each workspace's: a line only when there are any; every skill
    skipped or capped is named with its fix (the rest still load, so it is a warning)."""
    from vikingbot.skills.discover import scan, user_dir, workspace_dir
    from vikingbot.workspace.manager import WorkspaceManager

    manager = WorkspaceManager(paths.workspace_root, config.bot.sandbox.mode)
    folders = [(user_dir(paths.home), "user")]
    folders += [(workspace_dir(ws), "workspace") for ws in manager.list_workspaces()]
    count, problems = 0, []
    for folder, source in folders:
        skills, trouble = scan(folder, source)  # type: ignore[arg-type]
        count += len(skills)
        problems += [f"{p.folder}: {p.message}" for p in trouble]
    if problems:
        head = f"{count} loaded, {len(problems)} skipped or capped:\n  "
        return [Check("skills", "warn", head + "\n  ".join(problems))]
    if count:
        return [Check("skills", "ok", f"{count} loaded (vikingbot skills list)")]
    return []


# ---------------------------------------------------------------- time


def _timezone(config: Config) -> Check:
    from vikingbot.heartbeat.timezone import resolve_timezone

    hb = config.bot.heartbeat
    try:
        zone = resolve_timezone(hb.timezone)
    except VikingbotError as exc:
        return Check("timezone", "fail", str(exc))
    where = "configured" if hb.timezone else "the machine's"
    text = f"{zone.key} ({where})"
    hours = hb.active_hours
    if hours is None:
        return Check("timezone", "ok", f"{text}; heartbeat active all day")
    hours_zone = hours.timezone or zone.key
    if hours.start == hours.end:
        return Check(
            "timezone", "warn", f"{text}; active hours {hours.start}-{hours.end}: empty window"
        )
    return Check("timezone", "ok", f"{text}; active hours {hours.start}-{hours.end} {hours_zone}")


# ---------------------------------------------------------------- database


def _database(paths: Paths, fix: bool) -> Check:
    from vikingbot.redact import mask_url

    found = _schema(paths)
    if not fix or found.status != "warn":
        return found
    from vikingbot.store.db import StateStore

    try:
        StateStore.open(paths.database_url).close()  # opening creates and migrates
    except VikingbotError as exc:
        return Check("database", "fail", str(exc))
    done = _schema(paths)
    done.fixed = f"{mask_url(paths.database_url)}: created/migrated to the head"
    return done


def _schema(paths: Paths) -> Check:
    """The database's schema revision against this vikingbot's head (changes nothing)."""
    from vikingbot.redact import mask_url

    url = paths.database_url
    where = mask_url(url)
    sqlite_file = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    if sqlite_file is not None and not sqlite_file.exists():  # no SQLAlchemy import needed
        return Check("database", "warn", f"{where}: not created yet (first start or --fix does)")
    from sqlalchemy import create_engine
    from sqlalchemy.exc import SQLAlchemyError

    from vikingbot.store import migrations

    latest = migrations.LATEST_VERSION
    args = {"connect_timeout": 3} if url.startswith("postgres") else {}
    try:
        engine = create_engine(url, connect_args=args)
        try:
            with engine.connect() as conn:
                current = migrations.current_version(conn)
        finally:
            engine.dispose()
    except (SQLAlchemyError, VikingbotError, ImportError) as exc:
        return Check("database", "fail", f"{where}: {str(exc).splitlines()[0]}")
    if current < 0:
        return Check("database", "fail", f"{where}: its schema revision is not vikingbot's")
    if current > latest:
        return Check(
            "database", "fail", f"{where}: schema {current:04d} is newer than this vikingbot's"
        )
    if current < latest:
        return Check(
            "database",
            "warn",
            f"{where}: schema {current:04d}, head {latest:04d}: "
            "migrations pending (applied on next start, or --fix)",
        )
    return Check("database", "ok", f"{where}: schema {current:04d} (head)")


# ---------------------------------------------------------------- gateway


def _gateway(paths: Paths) -> tuple[Check, dict[str, Any] | None, GatewayClient | None]:
    """The gateway's row, and its ``/health`` answer and a client when one answers."""
    from vikingbot.gateway.client import GatewayClient

    try:
        client = GatewayClient.discover(paths)
    except (VikingbotError, OSError) as exc:
        return Check("gateway", "warn", f"cannot tell: {exc}"), None, None
    if client is None:
        return Check("gateway", "ok", "not running (CLI commands work locally)"), None, None
    info = client.info
    try:
        health = client.get("/health", timeout=3)
    except (VikingbotError, OSError, ValueError) as exc:
        row = Check("gateway", "fail", f"pid {info.pid} at {info.url} does not answer: {exc}")
        return row, None, None
    row = Check("gateway", "ok", f"running, pid {info.pid} at {info.url}")
    if not isinstance(health, dict):
        return row, None, None
    return row, health, client


# ---------------------------------------------------------------- permissions


def _permissions(home: Path, config_file: Path, fix: bool) -> list[Check]:
    from vikingbot.gateway.lock import SECRET_FILE, run_dir

    out = []
    try:
        mode = stat.S_IMODE(home.stat().st_mode)
    except OSError:
        mode = None
    if mode is not None and mode & 0o022:
        if fix:
            os.chmod(home, mode & ~0o022)
            out.append(
                Check("permissions", "ok", f"{home}", f"{home}: {mode:04o} -> {mode & ~0o022:04o}")
            )
        else:
            out.append(
                Check("permissions", "fail", f"{home} is {mode:04o}: others may write (--fix)")
            )
    secrets = [config_file, home / ".env", run_dir(home) / SECRET_FILE]
    bad = []
    for file in secrets:
        try:
            fmode = stat.S_IMODE(file.stat().st_mode)
        except OSError:
            continue  # missing: nothing to protect
        if not fmode & 0o077:
            continue
        if fix:
            try:
                os.chmod(file, 0o600)
            except OSError as exc:
                bad.append(Check("permissions", "fail", f"{file}: cannot chmod: {exc.strerror}"))
                continue
            bad.append(Check("permissions", "ok", f"{file}", f"{file}: {fmode:04o} -> 0600"))
        else:
            bad.append(
                Check(
                    "permissions",
                    "fail",
                    f"{file} is {fmode:04o}: others may read it (--fix makes it 0600)",
                )
            )
    out += bad
    if not out:
        out.append(Check("permissions", "ok", "home and secrets are private to you"))
    return out


def check_agent(config: Config, paths: Paths, environ: Mapping[str, str], *, live: bool) -> Check:
    """The agent check alone, for a config not saved yet (`vikingbot onboard` tests a
    key with it before writing anything)."""
    return _agent(config, paths, environ, live)
