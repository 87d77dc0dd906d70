"""`vikingbot inbox`: results delivered to the local dashboard inbox (the "bell").

Bare ``vikingbot inbox`` lists unread items; ``--all`` includes read ones,
``--mark-read`` marks what was listed as read. ``vikingbot inbox read ID...``
marks single items.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from vikingbot.cli.common import err_console, fail, get_config, print_json

if TYPE_CHECKING:
    from vikingbot.delivery.inbox import Inbox, InboxItem

app = typer.Typer(invoke_without_command=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]
UNREAD, READ = "●", " "


def _inbox(ctx: typer.Context) -> Inbox:
    from vikingbot.delivery.inbox import Inbox
    from vikingbot.errors import StoreError
    from vikingbot.store.db import StateStore

    _, paths = get_config(ctx)
    try:
        return Inbox(StateStore.open(paths.database_url))
    except StoreError as exc:
        fail(str(exc))


def _print_items(items: list[InboxItem]) -> None:
    for item in items:
        mark = UNREAD if item.unread else READ
        when = item.created_at.strftime("%Y-%m-%d %H:%M")
        kind = " (prompt)" if item.kind == "prompt" else ""
        source = f"  from {item.source}" if item.source else ""
        typer.echo(f"{mark} #{item.id}  {when} UTC  [{item.slot}]{kind}{source}")
        for line in item.text.splitlines() or [""]:
            typer.echo(f"    {line}")


@app.callback()
def inbox_cmd(
    ctx: typer.Context,
    json: JsonOpt = False,
    all_items: Annotated[bool, typer.Option("--all", help="Include items already read.")] = False,
    mark_read: Annotated[
        bool, typer.Option("--mark-read", help="Mark the listed items as read.")
    ] = False,
) -> None:
    """List unread inbox items (results for `dashboard` targets), oldest first."""
    if ctx.invoked_subcommand is not None:
        return
    from vikingbot.errors import StoreError

    inbox = _inbox(ctx)
    try:
        items = inbox.items(unread_only=not all_items)
        marked = inbox.mark_read([i.id for i in items if i.unread]) if mark_read else 0
    except StoreError as exc:
        fail(str(exc))
    if json:
        print_json([i.as_dict() for i in items])
    elif not items:
        typer.echo("Inbox is empty." if all_items else "No unread items.")
    else:
        _print_items(items)
    unread = sum(1 for i in items if i.unread) - marked
    if not json and items:
        err_console().print(f"{len(items)} shown, {max(unread, 0)} unread", highlight=False)


@app.command("read")
def read_cmd(
    ctx: typer.Context,
    ids: Annotated[list[int], typer.Argument(help="Item numbers to mark read (from the list).")],
    json: JsonOpt = False,
) -> None:
    """Mark items as read."""
    from vikingbot.errors import StoreError

    try:
        changed = _inbox(ctx).mark_read(ids)
    except StoreError as exc:
        fail(str(exc))
    if json:
        print_json({"marked": changed})
    else:
        typer.echo(f"Marked {changed} item(s) read.")
