"""`vikingbot pair`: let a stranger in by the code the bot gave them (commands/pairing.py).

With a gateway running the change goes through it (the running channel takes the
person at once); without one the config file is edited and the next start applies it.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from vikingbot.cli.common import fail, get_config, print_json

app = typer.Typer(no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]


def _act(ctx: typer.Context, verb: str, code: str) -> dict[str, Any]:
    import asyncio

    from vikingbot.cli.remote import call, gateway_client

    client = gateway_client(ctx)
    if client is not None:
        data: dict[str, Any] = call(client, "POST", "/api/v1/pair", {"verb": verb, "code": code})
        return data
    from vikingbot.commands.pairing import PairingBook
    from vikingbot.gateway.pairing_desk import PairingDesk

    _, paths = get_config(ctx)
    desk = PairingDesk(
        PairingBook(paths.data_dir / "pairing.json"),
        paths.config_file,
        audit=None,
        channel_of=lambda _name: None,
    )
    return asyncio.run(desk.act(verb, code))


def _done(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
    if not data.get("ok"):
        fail(str(data.get("error")))
    if as_json:
        return
    if "denied" in data:
        typer.echo(f"denied {data['denied']}")
        return
    when = "applied now" if data.get("applied") else "applied when the gateway starts"
    typer.echo(f"✓ {data['approved']} added to allow_from ({when})")


@app.command("list")
def list_cmd(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Pairing codes waiting for the owner."""
    rows = _act(ctx, "list", "")["pending"]
    if as_json:
        print_json(rows)
        return
    if not rows:
        typer.echo("no pairing requests")
    for r in rows:
        typer.echo(f"{r['code']}  {r['channel']}  {r['sender_id']}  until {r['expires_at'][:16]}")


@app.command("approve")
def approve_cmd(
    ctx: typer.Context, code: Annotated[str, typer.Argument()], as_json: JsonOpt = False
) -> None:
    """Add the person who got CODE to that channel's allow_from."""
    _done(_act(ctx, "approve", code), as_json)


@app.command("deny")
def deny_cmd(
    ctx: typer.Context, code: Annotated[str, typer.Argument()], as_json: JsonOpt = False
) -> None:
    """Drop CODE: its person stays out."""
    _done(_act(ctx, "deny", code), as_json)
