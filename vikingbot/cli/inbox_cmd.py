"""`vikingbot inbox`: results delivered to the local dashboard inbox (the "bell").

Bare ``vikingbot inbox`` lists unread items; ``--all`` includes read ones,
``--mark-read`` marks what was listed as read. ``vikingbot inbox read ID...``
marks single items.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

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
    """One row per item (● unread), its text under it."""
    from vikingbot.cli.tables import Col, ago, print_table

    print_table(
        "Inbox",
        [
            Col(" "),
            Col("#", right=True),
            Col("when"),
            Col("slot", wrap=True),
            Col("from", wrap=True),
        ],
        [
            [
                UNREAD if item.unread else READ,
                str(item.id),
                ago(item.created_at),
                item.slot + (" (prompt)" if item.kind == "prompt" else ""),
                item.source or "",
            ]
            for item in items
        ],
        notes=[item.text for item in items],
    )


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
    from vikingbot.cli.remote import call, gateway_client

    client = gateway_client(ctx)
    if client is not None:
        rows = call(client, "GET", f"/api/v1/inbox?unread={0 if all_items else 1}&limit=1000")
        marked = 0
        if mark_read:
            ids = [r["id"] for r in rows if r["unread"]]
            marked = call(client, "POST", "/api/v1/inbox/read", {"ids": ids})["marked"]
        if json:
            print_json([{**r, "via": "gateway"} for r in rows])
            return
        items = [_from_json(r) for r in rows]
    else:
        from vikingbot.errors import StoreError

        inbox = _inbox(ctx)
        try:
            items = inbox.items(unread_only=not all_items)
            marked = inbox.mark_read([i.id for i in items if i.unread]) if mark_read else 0
        except StoreError as exc:
            fail(str(exc))
        if json:
            print_json([{**i.as_dict(), "via": "local"} for i in items])
            return
    if not items:
        typer.echo("Inbox is empty." if all_items else "No unread items.")
    else:
        _print_items(items)
    unread = sum(1 for i in items if i.unread) - marked
    if items:
        err_console().print(f"{len(items)} shown, {max(unread, 0)} unread", highlight=False)


def _from_json(row: dict[str, Any]) -> InboxItem:
    from datetime import datetime

    from vikingbot.delivery.inbox import InboxItem

    def when(v: Any) -> datetime | None:
        return datetime.fromisoformat(v) if isinstance(v, str) else None

    created = when(row.get("created_at"))
    assert created is not None
    return InboxItem(
        int(row["id"]),
        str(row["slot"]),
        str(row["text"]),
        row.get("source"),
        str(row.get("kind") or "message"),
        created,
        when(row.get("read_at")),
    )


@app.command("read")
def read_cmd(
    ctx: typer.Context,
    ids: Annotated[list[int], typer.Argument(help="Item numbers to mark read (from the list).")],
    json: JsonOpt = False,
) -> None:
    """Mark items as read."""
    from vikingbot.cli.remote import call, gateway_client
    from vikingbot.errors import StoreError

    client = gateway_client(ctx)
    via = "gateway" if client is not None else "local"
    if client is not None:
        changed = int(call(client, "POST", "/api/v1/inbox/read", {"ids": ids})["marked"])
    else:
        try:
            changed = _inbox(ctx).mark_read(ids)
        except StoreError as exc:
            fail(str(exc))
    if json:
        print_json({"marked": changed, "via": via})
    else:
        typer.echo(f"Marked {changed} item(s) read.")
