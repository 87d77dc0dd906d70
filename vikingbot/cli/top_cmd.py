"""Top-level commands: `onboard` and `status`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from vikingbot.cli.common import get_config, print_json, state

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def register(app: typer.Typer) -> None:
    app.command("onboard")(onboard)
    app.command("status")(status)


def onboard(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Create the config, data folder and default workspace (safe to run again)."""
    from vikingbot.logs import setup_logging
    from vikingbot.onboard import ensure_first_start
    from vikingbot.runtime import Runtime

    # what was created goes to stderr (INFO); debug lines only with --verbose
    setup_logging(verbose=state(ctx).verbose)
    config, paths = get_config(ctx)
    rt = Runtime(config, paths)
    try:
        created = {k: str(v) for k, v in ensure_first_start(rt).items()}
    finally:
        rt.close()
    if as_json:
        print_json(created)
        return
    for name, where in created.items():
        typer.echo(f"{name + ':':<11}{where}")
    problem = rt.provider_problem()
    if problem:
        typer.echo(f"\nnext: {problem}")


def status(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Config path, data folder, provider, heartbeat, session and workspace counts."""
    from vikingbot.runtime import Runtime

    config, paths = get_config(ctx)
    rt = Runtime(config, paths)
    sessions_dir = paths.sessions_dir
    ws_root = paths.workspace_root
    hb = config.bot.heartbeat
    data: dict[str, Any] = {
        "config": str(paths.config_file),
        "data_dir": str(paths.data_dir),
        "database": _mask_url(paths.database_url),
        "provider": config.bot.agents.provider,
        "model": config.bot.agents.model,
        "provider_configured": rt.provider_problem() is None,
        "provider_problem": rt.provider_problem(),
        "heartbeat": {
            "enabled": hb.enabled,
            "interval_seconds": hb.interval_seconds,
            "mode": hb.mode,
        },
        "sandbox_mode": config.bot.sandbox.mode,
        "sessions": sum(1 for p in sessions_dir.glob("*.jsonl")) if sessions_dir.is_dir() else 0,
        "workspaces": sum(1 for p in ws_root.iterdir() if p.is_dir()) if ws_root.is_dir() else 0,
    }
    if as_json:
        print_json(data)
        return
    mark = "✓" if data["provider_configured"] else "✗"
    lines = [
        f"config:     {data['config']}",
        f"data:       {data['data_dir']}",
        f"database:   {data['database']}",
        f"provider:   {mark} {data['provider'] or '-'} / {data['model'] or '-'}",
        f"heartbeat:  {'on' if hb.enabled else 'off'}, every {hb.interval_seconds}s ({hb.mode})",
        f"sessions:   {data['sessions']}",
        f"workspaces: {data['workspaces']} ({data['sandbox_mode']})",
    ]
    if data["provider_problem"]:
        lines.append(f"\n{data['provider_problem']}")
    typer.echo("\n".join(lines))


def _mask_url(url: str) -> str:
    import re

    return re.sub(r"://([^:/@]+):[^@]+@", r"://\1:***@", url)
