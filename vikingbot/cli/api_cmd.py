"""`vikingbot api token add|list|revoke`: client tokens for the gateway's OpenAI-compatible
API (/v1) and MCP server (docs/openai-api.md).

A token is shown once, when it is made; only its SHA-256 is kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from vikingbot.cli.common import err_console, fail, get_config, print_json

if TYPE_CHECKING:
    from vikingbot.openai_api.tokens import TokenStore

app = typer.Typer(no_args_is_help=True)
token_app = typer.Typer(no_args_is_help=True)
app.add_typer(token_app, name="token", help="Client tokens (one per client, shown once).")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]


def _store(ctx: typer.Context) -> TokenStore:
    from vikingbot.openai_api.tokens import TokenStore, tokens_file

    _, paths = get_config(ctx)
    return TokenStore(tokens_file(paths.data_dir))


@token_app.command("add")
def add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The client's name (its sessions: api:NAME:...).")],
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help="chat (the OpenAI API), mcp (MCP read tools), mcp-write (MCP tools that "
            "change something). Repeat it; default: chat.",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Make a token for NAME (replacing its old one) and print it once."""
    from vikingbot.errors import ConfigError
    from vikingbot.openai_api.tokens import SCOPES

    scopes = scope or ["chat"]
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown:
        fail(f"unknown scope {unknown[0]!r}: use {', '.join(SCOPES)}", code=2)
    if "mcp-write" in scopes and "mcp" not in scopes:
        scopes.append("mcp")
    try:
        token = _store(ctx).add(name, tuple(scopes))  # type: ignore[arg-type]
    except ConfigError as exc:
        fail(str(exc), code=2)
    if json_out:
        print_json({"name": name, "scopes": scopes, "token": token})
        return
    typer.echo(token)
    err_console().print(
        f"✓ Token for {name} ({', '.join(scopes)}). It is shown only now: keep it somewhere safe."
    )


@token_app.command("list")
def list_(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """The clients that have a token (never the tokens)."""
    rows = _store(ctx).listing()
    if json_out:
        print_json(rows)
        return
    if not rows:
        err_console().print("No client tokens (vikingbot api token add NAME).")
        return
    for row in rows:
        typer.echo(f"{row['name']}\t{','.join(row['scopes'])}\t{row['created']}")


@token_app.command("revoke")
def revoke(
    ctx: typer.Context, name: Annotated[str, typer.Argument(help="The client's name.")]
) -> None:
    """Forget NAME's token: a running gateway refuses it from its next request."""
    if not _store(ctx).revoke(name):
        fail(f"no client named {name!r} has a token (vikingbot api token list)")
    err_console().print(f"✓ Revoked the token of {name}; the gateway refuses it from now on.")
