"""`vikingbot channels status`: what each chat platform is set up to do (from config only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from vikingbot.cli.common import get_config, print_json

if TYPE_CHECKING:
    from vikingbot.config.schema import ChannelBase, Config

app = typer.Typer(no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]


def _secret(value: Any) -> bool:
    return value is not None and bool(value.get_secret_value())


def _needs(name: str, section: ChannelBase) -> tuple[list[str], list[str]]:
    """(settings missing to send at all, notes about reduced function)."""
    from vikingbot.config.schema import SlackConfig, TelegramConfig, WebhookConfig

    missing: list[str] = []
    notes: list[str] = []
    if isinstance(section, SlackConfig):
        if not _secret(section.bot_token):
            missing.append("bot_token")
        if not _secret(section.app_token):
            notes.append("no app_token: can send, cannot receive (Socket Mode)")
    elif isinstance(section, TelegramConfig):
        if not _secret(section.token):
            missing.append("token")
    elif isinstance(section, WebhookConfig):
        if not section.outbound_urls:
            missing.append("outbound_urls")
        if not _secret(section.inbound_token):
            notes.append("no inbound_token: POST /webhook/inbound is off")
    return missing, notes


def channel_rows(config: Config) -> list[dict[str, Any]]:
    """One row per channel: name, enabled, configured, missing, owner_chat, allow_from, notes."""
    from vikingbot.channels.owner import channel_sections, owner_chat_for

    rows = []
    for name, section in channel_sections(config).items():
        missing, notes = _needs(name, section)
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
    from vikingbot.channels.owner import owner_of

    config, _ = get_config(ctx)
    rows = channel_rows(config)
    owner = owner_of(config)
    if json:
        print_json(
            {
                "owner": str(owner) if owner else None,
                "send_retries": config.bot.channels.send_retries,
                "channels": rows,
            }
        )
        return
    table = [("CHANNEL", "ENABLED", "CONFIGURED", "OWNER CHAT", "ALLOW FROM")]
    for row in rows:
        allow = row["allow_from"]
        table.append(
            (
                row["name"],
                "yes" if row["enabled"] else "no",
                "yes" if row["configured"] else "missing " + ", ".join(row["missing"]),
                row["owner_chat"] or "-",
                allow if isinstance(allow, str) else ", ".join(allow),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    typer.echo(
        f"owner: {owner}"
        if owner
        else "owner: not set (results go to the most recently active chat, else the inbox)"
    )
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
