"""`vikingbot sessions ...`: list sessions, switch their heartbeat, import history."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vikingbot.cli.common import fail, get_config, print_json

if TYPE_CHECKING:
    from vikingbot.agent.types import AgentLoop
    from vikingbot.session.store import SessionStore
    from vikingbot.session.types import SessionKey, SessionMeta

app = typer.Typer(no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]


class OnOff(StrEnum):
    on = "on"
    off = "off"


def _store(ctx: typer.Context) -> SessionStore:
    from vikingbot.session.store import SessionStore

    _, paths = get_config(ctx)
    return SessionStore(paths.sessions_dir)


def _parse_key(text: str) -> SessionKey:
    from vikingbot.errors import SessionError
    from vikingbot.session.types import SessionKey

    try:
        return SessionKey.parse(text)
    except SessionError as exc:
        raise typer.BadParameter(str(exc), param_hint="KEY") from exc


def _row(store: SessionStore, meta: SessionMeta) -> dict[str, Any]:
    return {
        "key": str(meta.key),
        "created_at": meta.created_at,
        "updated_at": meta.updated_at,
        "last_user_at": meta.last_user_at,
        "skip_heartbeat": meta.skip_heartbeat,
        "messages": store.message_count(meta.key),
    }


@app.command("list")
def list_cmd(ctx: typer.Context, json: JsonOpt = False) -> None:
    """List sessions, most recently updated first."""
    from vikingbot.errors import SessionError

    store = _store(ctx)
    errors: list[SessionError] = []
    rows = [_row(store, meta) for meta in store.list_sessions(errors)]
    if json:
        print_json({"sessions": rows, "errors": [str(e) for e in errors]})
    else:
        _print_table(rows)
    if errors:
        from vikingbot.cli.common import err_console

        console = err_console()
        for exc in errors:
            console.print(f"[yellow]Skipped:[/] {exc}", highlight=False, soft_wrap=True)


def _print_table(rows: list[dict[str, Any]]) -> None:
    from vikingbot.cli.tables import Col, ago, print_table

    print_table(
        "Sessions",
        [
            Col("key", wrap=True),
            Col("updated"),
            Col("last user message"),
            Col("heartbeat"),
            Col("messages", right=True),
        ],
        [
            [
                row["key"],
                ago(row["updated_at"]) if row["updated_at"] else "-",
                ago(row["last_user_at"]) if row["last_user_at"] else "-",
                "off" if row["skip_heartbeat"] else "on",
                str(row["messages"]),
            ]
            for row in rows
        ],
        empty="No sessions yet.",
    )


@app.command("heartbeat")
def heartbeat_cmd(
    ctx: typer.Context,
    state: Annotated[OnOff, typer.Argument(help="on: the heartbeat may visit it; off: skip it.")],
    key: Annotated[str, typer.Argument(help="Session key, e.g. telegram:default:12345.")],
) -> None:
    """Let the heartbeat visit a session (on) or skip it (off)."""
    from vikingbot.errors import SessionError

    session_key = _parse_key(key)
    store = _store(ctx)
    try:
        if store.get_meta(session_key) is None:
            fail(f"unknown session {session_key}; see `vikingbot sessions list`")
        meta = store.update_metadata(session_key, skip_heartbeat=state is OnOff.off)
    except SessionError as exc:
        fail(str(exc))
    verb = "skips" if meta.skip_heartbeat else "visits"
    typer.echo(f"Heartbeat {state.value} for {meta.key}: the heartbeat now {verb} it.")


@app.command("import-openviking")
def import_openviking_cmd(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="OpenViking sessions folder (or one .jsonl file).")],
    json: JsonOpt = False,
) -> None:
    """Copy sessions from an OpenViking vikingbot installation (the source is not changed)."""
    from vikingbot.errors import SessionError
    from vikingbot.session.openviking import import_openviking

    store = _store(ctx)
    try:
        report = import_openviking(path.expanduser(), store)
    except SessionError as exc:
        fail(str(exc))
    if not report.outcomes:
        fail(f"no session files (*.jsonl) found in {path}")
    if json:
        print_json(report.to_dict())
    else:
        for o in report.outcomes:
            if o.status == "imported":
                typer.echo(f"imported  {o.key}  ({o.messages} messages)  from {o.source}")
            elif o.status == "exists":
                typer.echo(f"exists    {o.key}  (left as it is)  from {o.source}")
        typer.echo(
            f"{report.count('imported')} imported, {report.count('exists')} already present, "
            f"{report.count('failed')} failed."
        )
    if report.count("failed"):
        from vikingbot.cli.common import err_console

        console = err_console()
        for o in report.outcomes:
            if o.status == "failed":
                console.print(f"[yellow]Skipped:[/] {o.reason}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)


@app.command("search")
def search_cmd(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help='Words to find; "a phrase" in quotes.')],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=200, help="At most N.")] = 20,
    json: JsonOpt = False,
) -> None:
    """Full-text search over session history (brings the index up to date first)."""
    from vikingbot.errors import StoreError
    from vikingbot.housekeeping.index import index_sessions
    from vikingbot.housekeeping.search import search
    from vikingbot.store.db import StateStore

    _, paths = get_config(ctx)
    try:
        db = StateStore.open(paths.database_url)
    except StoreError as exc:
        fail(str(exc))
    try:
        index_sessions(db, paths.sessions_dir)
        hits = search(db, query, limit)
    finally:
        db.close()
    if json:
        print_json({"query": query, "hits": [h.to_dict() for h in hits]})
        return
    from vikingbot.cli.tables import Col, local, print_table

    print_table(
        f"Matches for {query!r}",
        [Col("at"), Col("session", wrap=True), Col("role")],
        [[local(h.at), str(h.session_key), h.role] for h in hits],
        notes=[h.snippet for h in hits],
        empty=f"No matches for {query!r}.",
    )


@app.command("compact")
def compact_cmd(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="Session key (type:channel_id:chat_id).")],
    json: JsonOpt = False,
) -> None:
    """Fold a session's older turns into its summary now (one model call; the messages stay
    on disk and in history search)."""
    from vikingbot.errors import VikingbotError
    from vikingbot.gateway.compose import build_home

    k = _parse_key(key)
    config, paths = get_config(ctx)
    if _store(ctx).get_meta(k) is None:
        fail(f"unknown session {k}; see `vikingbot sessions list`")
    rt = build_home(config, paths)
    try:
        said = compact_now(rt.new_agent(), k)
    except VikingbotError as exc:
        fail(str(exc))
    finally:
        rt.close()
    if json:
        print_json({"session": str(k), "result": said})
    else:
        typer.echo(said)


def compact_now(loop: AgentLoop, key: SessionKey) -> str:
    """``loop.compact(key)`` run to the end, the loop closed after (also ``/compact``)."""
    import asyncio

    async def run() -> str:
        try:
            return await loop.compact(key)
        finally:
            await loop.aclose()

    return asyncio.run(run())
