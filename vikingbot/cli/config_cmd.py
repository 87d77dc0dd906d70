"""`vikingbot config path | show | get | set`."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from vikingbot.cli.common import fail, get_config, print_json, state

app = typer.Typer(no_args_is_help=True)


@app.command("path")
def path_cmd(ctx: typer.Context) -> None:
    """Print the config file's path."""
    from vikingbot.config.loader import config_path

    typer.echo(str(config_path(state(ctx).config_path)))


@app.command("show")
def show_cmd(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show the effective config (file + environment + defaults), secrets masked."""
    from vikingbot.config.edit import to_plain

    config, _ = get_config(ctx)
    data = to_plain(config)
    if as_json:
        print_json(data)
    else:
        from rich.console import Console
        from rich.syntax import Syntax

        Console().print(Syntax(json.dumps(data, indent=2), "json", theme="ansi_dark"))


@app.command("get")
def get_cmd(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="Dotted key, e.g. bot.heartbeat.enabled")],
) -> None:
    """Print the effective value of one key (JSON)."""
    from vikingbot.config.edit import get_value, to_plain
    from vikingbot.errors import ConfigError

    config, _ = get_config(ctx)
    try:
        value = get_value(config, key)
    except ConfigError as exc:
        fail(str(exc))
    typer.echo(json.dumps(to_plain(value, name=key), ensure_ascii=False))


@app.command("set")
def set_cmd(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="Dotted key, e.g. bot.heartbeat.enabled")],
    value: Annotated[
        str, typer.Argument(help='JSON value (true, 600, "text", [..]) or plain text')
    ],
) -> None:
    """Set one key in the config file (validated, atomic, other keys kept).

    With the gateway running, returns once it has applied the change, or says why not."""
    from vikingbot.config.edit import parse_cli_value, set_value
    from vikingbot.config.loader import config_path
    from vikingbot.errors import ConfigError

    path = config_path(state(ctx).config_path)
    get_config(ctx)  # creates the file on first use; fails early on a broken one
    try:
        raw = set_value(path, key, parse_cli_value(value))
    except ConfigError as exc:
        fail(str(exc))

    shown = "***" if _holds_secret(raw, key) else value
    from vikingbot.cli.config_apply import tell_gateway

    tell_gateway(ctx, key, f"{key} = {shown}  ({path})")


def _holds_secret(raw: dict[str, object], key: str) -> bool:
    """Whether the value just written at ``key`` is (or contains) a secret."""
    from vikingbot.config.edit import get_value, to_plain
    from vikingbot.config.loader import to_field_names
    from vikingbot.config.schema import Config

    value = get_value(Config.model_validate(to_field_names(raw, Config)), key)
    return bool(to_plain(value, name=key) != to_plain(value, reveal=True, name=key))
