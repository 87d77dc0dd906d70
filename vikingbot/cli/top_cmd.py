"""Top-level command: `status` (`onboard` is in onboard_cmd.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vikingbot.cli.common import get_config, print_json, state
from vikingbot.redact import mask_url
from vikingbot.session.sizes import last_requests

if TYPE_CHECKING:
    from vikingbot.config.loader import Paths
    from vikingbot.config.schema import Config

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def register(app: typer.Typer) -> None:
    app.command("status")(status)


def status(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Config path, data folder, provider, heartbeat, session and workspace counts."""
    data = _status_data(state(ctx).config_path, lambda: _config_view(ctx))
    assert data is not None
    _show_status(data, as_json)


def fast_status(argv: list[str]) -> bool:
    """`vikingbot status [--json]` without Typer's option parsing (which builds pydantic
    adapters for every option): from the cached config summary, else (the first start,
    a changed config) validating the config here; ``False``: let the normal command run
    (a bad config, whose error it prints)."""
    if argv not in (["status"], ["status", "--json"]):
        return False
    from vikingbot.errors import VikingbotError

    os.environ.setdefault("LOGURU_LEVEL", "WARNING")  # as the app's callback sets it
    try:
        data = _status_data(None, _plain_view)
    except (VikingbotError, OSError):  # the command itself reports it
        return False
    assert data is not None
    _show_status(data, as_json=argv[-1] == "--json")
    return True


View = tuple[dict[str, Any], set[str]]  # what status shows, the variables it looked up


def _status_data(
    config_opt: Path | None, validate: Callable[[], View] | None
) -> dict[str, Any] | None:
    """The status object; with ``validate=None`` only from the cached summary (else None)."""
    from vikingbot.config import status_cache
    from vikingbot.config.paths import config_path, home_dir

    home, path = home_dir(), config_path(config_opt)
    digest = status_cache.inputs_digest(path, home, os.environ)
    view = status_cache.load(home, digest, os.environ) if digest else None
    if view is None:  # the config changed (or first run): validate it
        if validate is None:
            return None
        view, reads = validate()
        digest = status_cache.inputs_digest(path, home, os.environ)
        if digest:
            status_cache.save(home, digest, view, reads, os.environ)
    data_dir = Path(view["data_dir"])
    data: dict[str, Any] = {
        **view,
        "sessions": _count(data_dir / "sessions", lambda e: e.name.endswith(".jsonl")),
        "workspaces": _count(data_dir / "workspace", lambda e: e.is_dir()),
        "last_requests": last_requests(data_dir / "sessions"),
    }
    pid, health = _gateway_health(home, path, data_dir, str(view["database"])) or (0, {})
    agent = health.get("agent")
    if isinstance(agent, dict):  # the gateway's own answer
        data["agent"] = {
            "loop": str(agent.get("loop") or view["agent"]["loop"]),
            "ready": bool(agent.get("ready")),
            "problem": agent.get("problem"),
            "detail": agent.get("detail", view["agent"]["detail"]),
            "checked": "gateway",
            "where": f"in the running gateway, pid {pid}",
            "subagents": list(agent.get("subagents") or []),
            "models_down": agent.get("models_down") or [],
        }
    else:
        data["agent"] = {**view["agent"], "checked": "shell", "where": SHELL}
    gateways = health.get("gateways")
    if isinstance(gateways, list):
        data["gateways"] = gateways
    return data


SHELL = "in this shell's environment"


def _show_status(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    hb = data["heartbeat"]
    agent = data["agent"]
    mark = "✓" if agent["ready"] else "✗"
    lines = [
        f"config:     {data['config']}",
        f"data:       {data['data_dir']}",
        f"database:   {data['database']}",
        f"agent:      {mark} {agent['loop']}: {agent['detail'] or '-'} ({agent['where']})",
        f"heartbeat:  {'on' if hb['enabled'] else 'off'}, every {hb['interval_seconds']}s "
        f"({hb['mode']})",
        f"sessions:   {data['sessions']}",
        f"workspaces: {data['workspaces']} ({data['sandbox_mode']})",
    ]
    for gw in data.get("gateways") or []:
        from vikingbot.cli.tables import ago

        held = ", ".join(gw.get("channels") or []) or "-"
        lines.append(
            f"gateway:    {gw['id']} {gw['state']} at {gw.get('address') or '-'}, "
            f"seen {ago(gw['seen_at'])}, receives: {held}"
        )
    for r in data.get("last_requests") or []:
        lines.append(
            f"request:    {r['session']}: {r['total']:,} chars = system {r['system']:,}"
            f" + memory {r['memory']:,} + summary {r['summary']:,} + recent {r['recent']:,}"
            f" + tools {r['tools']:,}"
        )
    for sub in agent.get("subagents") or []:
        lines.append(f"sub-agent:  {sub['id']} running since {sub['started']}: {sub['label']}")
    for down in agent.get("models_down") or []:
        lines.append(
            f"model down: {down.get('model')} since {down.get('since')} "
            f"({down.get('error')}); a fallback answers (bot.agents.fallback_models)"
        )
    if agent["problem"]:
        lines.append(f"\n{agent['problem']}")
    typer.echo("\n".join(lines))


def _gateway_health(
    home: Path, config: Path, data_dir: Path, database: str
) -> tuple[int, dict[str, Any]] | None:
    """This home's running gateway's pid and ``/health`` answer (its agent's readiness,
    the gateways sharing the database: docs/scaling.md); None when no gateway answers."""
    from vikingbot.config.paths import Paths
    from vikingbot.errors import VikingbotError
    from vikingbot.gateway.lock import INFO_FILE, run_dir

    if not (run_dir(home) / INFO_FILE).exists():
        return None  # no gateway ever ran here: skip the HTTP client's import cost
    from vikingbot.gateway.client import GatewayClient

    paths = Paths(home=home, config_file=config, data_dir=data_dir, database_url=database)
    try:
        client = GatewayClient.discover(paths)
        health = client.get("/health", timeout=3) if client is not None else None
    except (VikingbotError, OSError, ValueError):
        return None
    if client is None or not isinstance(health, dict):
        return None
    return client.info.pid, health


def _config_view(ctx: typer.Context) -> View:
    """What `status` shows that depends only on the config (validated here)."""
    return _view(*get_config(ctx))


def _plain_view() -> View:
    """``_config_view`` for the default config path, outside Typer (raises ConfigError)."""
    from vikingbot.config.loader import load_config

    return _view(*load_config(None))


def _view(config: Config, paths: Paths) -> View:
    from vikingbot.config.loader import home_environ
    from vikingbot.config.status_cache import Reads
    from vikingbot.gateway.compose import build_home

    # the loop's own answer (docs/agents.md), in the environment a home would have
    environ = Reads(home_environ(paths.home))
    ready = build_home(config, paths, environ=environ).readiness()
    hb = config.bot.heartbeat
    view = {
        "config": str(paths.config_file),
        "data_dir": str(paths.data_dir),
        "database": mask_url(paths.database_url),
        "provider": config.bot.agents.provider,
        "model": config.bot.agents.model,
        "agent": {
            "loop": config.bot.agents.loop,
            "ready": ready.ready,
            "problem": ready.problem,
            "detail": ready.detail,
        },
        "heartbeat": {
            "enabled": hb.enabled,
            "interval_seconds": hb.interval_seconds,
            "mode": hb.mode,
        },
        "sandbox_mode": config.bot.sandbox.mode,
    }
    return view, environ.names


def _count(folder: Path, keep: Callable[[os.DirEntry[str]], bool]) -> int:
    try:
        with os.scandir(folder) as it:
            return sum(1 for e in it if not e.name.startswith(".") and keep(e))
    except OSError:
        return 0
