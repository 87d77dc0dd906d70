"""`vikingbot doctor [--json] [--live] [--fix]`: one screen saying what works and what not."""

from __future__ import annotations

from typing import Annotated

import typer

from vikingbot.cli.common import print_json, state


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


def doctor(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Make one minimal real call through the agent loop, and ask each channel's platform.",
        ),
    ] = False,
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Do what is safe: create the config, default workspace and database, "
            "apply migrations, make secrets private.",
        ),
    ] = False,
) -> None:
    """Check config, agent, channels, HEARTBEAT.md files, timezone, database, gateway and
    permissions. Exit 0 only when nothing failed (✗)."""
    from vikingbot import doctor as doc
    from vikingbot.logs import quiet

    if not state(ctx).verbose:
        quiet()
    checks = doc.run(state(ctx).config_path, live=live, fix=fix)
    bad = doc.failed(checks)
    if as_json:
        print_json({"ok": not bad, "checks": [c.as_dict() for c in checks]})
    else:
        width = max(len(c.name) for c in checks) + 1
        for c in checks:
            typer.echo(f"{doc.MARKS[c.status]} {c.name:<{width}} {c.message}")
            if c.fixed:
                typer.echo(f"  fixed: {c.fixed}")
        fails = sum(c.status == "fail" for c in checks)
        warns = sum(c.status == "warn" for c in checks)
        typer.echo(f"\n{fails} failed, {warns} to look at" if fails or warns else "\nall good")
    if bad:
        raise typer.Exit(1)
