"""`vikingbot memory ...`: what the bot remembers, each change and its undo."""

from __future__ import annotations

from typing import Annotated

import typer

from vikingbot.cli.common import chat_workspace, fail, print_json

app = typer.Typer(no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]
WorkspaceOpt = Annotated[
    str | None,
    typer.Option(
        "--workspace",
        "-w",
        help="A workspace's folder name (default: the terminal chat's workspace).",
    ),
]


@app.command("log")
def log_cmd(ctx: typer.Context, workspace: WorkspaceOpt = None, json: JsonOpt = False) -> None:
    """List the changes to memory/MEMORY.md and memory/USER.md, newest first."""
    from vikingbot.memory import versions

    ws = chat_workspace(ctx, workspace)
    found = versions.log(ws)
    if json:
        rows = [
            {"id": v.id, "at": v.at, "reason": v.reason, "files": sorted(v.files), "stat": v.stat()}
            for v in found
        ]
        print_json({"workspace": str(ws), "versions": rows})
        return
    if not found:
        typer.echo(f"No memory changes recorded in {ws / 'memory'}.")
        return
    for v in found:
        files = ", ".join(sorted(v.files))
        typer.echo(f"{v.id}  {v.at:%Y-%m-%d %H:%M}  {v.stat():>9}  {files}  {v.reason}")


@app.command("show")
def show_cmd(
    ctx: typer.Context,
    version: Annotated[str, typer.Argument(help="A change id from `memory log` (or its start).")],
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
) -> None:
    """Show one change as a diff."""
    from vikingbot.errors import VikingbotError
    from vikingbot.memory import versions

    try:
        v = versions.get(chat_workspace(ctx, workspace), version)
    except VikingbotError as exc:
        fail(str(exc))
    if json:
        print_json({**v.to_dict(), "diff": v.diff()})
        return
    typer.echo(f"{v.id}  {v.at:%Y-%m-%d %H:%M}  {v.reason}")
    typer.echo(v.diff(), nl=False)


@app.command("undo")
def undo_cmd(
    ctx: typer.Context,
    version: Annotated[str, typer.Argument(help="The change to undo (an id from `memory log`).")],
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
) -> None:
    """Put back what a change replaced (recorded as a change of its own)."""
    from vikingbot.errors import VikingbotError
    from vikingbot.memory import versions

    try:
        done = versions.undo(chat_workspace(ctx, workspace), version)
    except VikingbotError as exc:
        fail(str(exc))
    if json:
        print_json({"undone": version, "version": done.id, "stat": done.stat()})
        return
    typer.echo(f"Undone: {done.reason} is now change {done.id} ({done.stat()}).")
