"""`vikingbot chat` attached to the running gateway (the turn runs there).

One-shot (``-m``) posts the message to ``/api/v1/chat``. Interactive mode does the
same per line, and a background thread follows ``/api/v1/events`` so heartbeat
and cron results are printed as they arrive; at its start it says how many
unread inbox items wait. There is no terminal to ask for approval in the
gateway: tools that need it follow ``bot.tools.auto_approve`` or are refused
(the refusal is shown like any tool call).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import typer

from vikingbot.cli.common import fail, print_json
from vikingbot.cli.remote import call

if TYPE_CHECKING:
    from rich.console import Console

    from vikingbot.gateway.client import GatewayClient

HELP = "/exit quits (or Ctrl-D) · runs in the gateway: results arrive here as they come"
EVENT_WAIT_S = 25


def one_shot(client: GatewayClient, session: str, message: str, as_json: bool) -> None:
    data = call(client, "POST", "/api/v1/chat", {"text": message, "session": session})
    if as_json:
        print_json({**data, "via": "gateway"})
        if data.get("ended") == "error":
            raise typer.Exit(1)
        return
    for text in data.get("messages") or []:
        typer.echo(text)
    if data.get("ended") in ("error", "timeout"):
        fail(data.get("error") or "the turn failed")
    typer.echo(data.get("reply") or "")


def interactive(client: GatewayClient, session: str) -> None:
    from rich.console import Console

    console = Console()
    info = call(client, "GET", "/api/v1/gateway")
    console.print(
        f"[bold]vikingbot chat[/] · session {session} · via the gateway (pid {info['pid']})"
    )
    console.print(f"[dim]{HELP}[/]")
    unread = call(client, "GET", "/api/v1/inbox?unread=1&limit=1000")
    if unread:
        console.print(
            f"[yellow]{len(unread)} unread inbox item(s)[/] [dim](vikingbot inbox)[/]",
            highlight=False,
        )
    last = max((int(i["id"]) for i in unread), default=0)
    latest = call(client, "GET", f"/api/v1/events?after={last}&wait=0")
    stop = threading.Event()
    follower = threading.Thread(
        target=_follow, args=(client, console, int(latest["last"]), stop), daemon=True
    )
    follower.start()
    try:
        while True:
            try:
                line = console.input("[bold cyan]you›[/] ")
            except EOFError:
                console.print()
                break
            except KeyboardInterrupt:
                console.print("\n[dim](Ctrl-D or /exit quits)[/]")
                continue
            text = line.strip()
            if not text:
                continue
            if text in ("/exit", "/quit"):
                break
            if text == "/help":
                console.print(f"[dim]{HELP}[/]")
                continue
            data = call(client, "POST", "/api/v1/chat", {"text": text, "session": session})
            _show(console, data)
    finally:
        stop.set()


def _show(console: Console, data: dict[str, Any]) -> None:
    from rich.markdown import Markdown
    from rich.markup import escape
    from rich.panel import Panel

    for text in data.get("messages") or []:
        console.print(Panel(Markdown(text), title="message", border_style="cyan"))
    for c in data.get("tool_calls") or []:
        mark = "refused" if not c.get("approved") else ("error" if c.get("error") else "✓")
        console.print(f"[dim]  ⚙ {escape(str(c.get('name')))}  {mark}[/]")
    if data.get("ended") in ("error", "timeout"):
        console.print(f"[bold red]Error:[/] {escape(str(data.get('error') or data.get('ended')))}")
        return
    if data.get("reply"):
        console.print(Markdown(str(data["reply"])))


def _follow(client: GatewayClient, console: Console, after: int, stop: threading.Event) -> None:
    """Print new inbox items (heartbeat and cron results) until ``stop``."""
    from rich.markdown import Markdown
    from rich.panel import Panel

    from vikingbot.errors import VikingbotError

    while not stop.is_set():
        try:
            data = client.get(f"/api/v1/events?after={after}&wait={EVENT_WAIT_S}", timeout=60)
        except VikingbotError as exc:
            if not stop.is_set():
                console.print(f"[yellow]stopped following results: {exc}[/]")
            return
        for item in data.get("items") or []:
            if item.get("kind") == "prompt":
                continue
            title = f"#{item['id']} from {item.get('source') or item.get('slot')}"
            console.print(Panel(Markdown(str(item.get("text", ""))), title=title))
        after = int(data.get("last", after))
