"""`vikingbot channels status`: what each chat platform is set up to do (from the config),
and what the running gateway does not run of it ("in the config, not running")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from vikingbot.cli.common import get_config, print_json

if TYPE_CHECKING:
    from vikingbot.config.schema import ChannelBase, Config
    from vikingbot.gateway.drift import Drift

app = typer.Typer(no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]


def _problems(name: str, section: ChannelBase) -> tuple[list[str], list[str]]:
    """(settings missing to send at all, notes about reduced function), from the channel."""
    from vikingbot import registry
    from vikingbot.errors import VikingbotError

    try:
        cls = registry.load_ready("channels", name)
    except (VikingbotError, ImportError) as exc:
        return [], [f"cannot load the channel: {exc}"]
    found = cls.problems(section)
    return list(found.missing), list(found.notes)


def channel_rows(config: Config) -> list[dict[str, Any]]:
    """One row per channel: name, enabled, configured, missing, owner_chat, allow_from, notes."""
    from vikingbot.delivery.owner import channel_sections, owner_chat_for

    rows = []
    for name, section in channel_sections(config).items():
        missing, notes = _problems(name, section)
        allow = section.allow_from
        rows.append(
            {
                "name": name,
                "enabled": section.enabled,
                "configured": not missing,
                "missing": missing,
                "owner_chat": owner_chat_for(config, name),
                "allow_from": "everyone" if "*" in allow else (list(allow) or "owner only"),
                "notes": notes,
            }
        )
    return rows


@app.command("status")
def status_cmd(ctx: typer.Context, json: JsonOpt = False) -> None:
    """Per channel: enabled, configured, missing tokens, owner chat, who may talk. No network."""
    from vikingbot.delivery.owner import owner_of

    config, _ = get_config(ctx)
    rows = channel_rows(config)
    owner = owner_of(config)
    drifted = _drift(ctx, config)
    if json:
        print_json(
            {
                "owner": str(owner) if owner else None,
                "send_retries": config.bot.channels.send_retries,
                "channels": rows,
                "not_running": [{"what": d.what, "why": d.why} for d in drifted],
            }
        )
        return
    from vikingbot.cli.tables import Col, print_table

    def allowed(row: dict[str, Any]) -> str:
        allow = row["allow_from"]
        return allow if isinstance(allow, str) else ", ".join(allow)

    print_table(
        "Channels",
        [
            Col("channel"),
            Col("enabled"),
            Col("configured", wrap=True),
            Col("owner chat", wrap=True),
            Col("allow from", wrap=True),
        ],
        [
            [
                row["name"],
                "yes" if row["enabled"] else "no",
                "yes" if row["configured"] else "missing " + ", ".join(row["missing"]),
                row["owner_chat"] or "-",
                allowed(row),
            ]
            for row in rows
        ],
    )
    typer.echo(
        f"owner: {owner}"
        if owner
        else "owner: not set (results go to the most recently active chat, else the inbox)"
    )
    for d in drifted:
        typer.echo(f"{d.what}: in the config, not running: {d.why}", err=True)
    for row in rows:
        if row["enabled"]:
            for note in row["notes"]:
                typer.echo(f"{row['name']}: {note}", err=True)
            if row["missing"]:
                typer.echo(
                    f"{row['name']}: enabled but missing {', '.join(row['missing'])}: "
                    f"set bot.channels.{row['name']}.{row['missing'][0]}",
                    err=True,
                )


def _drift(ctx: typer.Context, config: Config) -> list[Drift]:
    """What the running gateway does not run of the config (none without a gateway)."""
    from vikingbot.cli.remote import gateway_client
    from vikingbot.errors import VikingbotError
    from vikingbot.gateway.drift import drift

    client = gateway_client(ctx)
    if client is None:
        return []
    try:
        health = client.get("/health", timeout=3)
    except VikingbotError:
        return []
    return drift(config, health) if isinstance(health, dict) else []
