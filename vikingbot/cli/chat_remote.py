"""`vikingbot chat` attached to the running gateway (the turn runs there).

One-shot (``-m``) posts the message to ``/api/v1/chat``. Interactive mode is the
shared chat loop (``chat_loop``) with a *send turn* that posts each line the same
way, over an async HTTP client so that Ctrl-C drops the request at once; the
gateway sees the client go and cancels the turn (the prompt stays in the
session, no half reply). A background task follows ``/api/v1/events`` and prints
heartbeat and cron results as they arrive; at its start the chat says how many
unread inbox items wait. A tool that needs approval is asked here, as in a local
chat (``Allow …? [y/N]``): the gateway sends an ``ask`` event on the turn's
stream and waits for the answer (``/api/v1/chat/answer``); no answer within the
``cli`` channel's ``approval_timeout_s`` denies. (``-m`` does not stream: such a
tool follows ``bot.tools.auto_approve`` or is refused.) The turn is asked for as a stream
(``"stream": true``, see ``gateway.chat_stream``), so each retry of the model SDK
in the gateway is one line here as it happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from vikingbot.cli.common import fail, print_json
from vikingbot.cli.remote import call

if TYPE_CHECKING:
    import httpx
    from rich.console import Console

    from vikingbot.cli.chat_loop import ChatTerminal, Reply
    from vikingbot.gateway.client import GatewayClient

HELP = (
    "/exit, Ctrl-D or Ctrl-C quits · Ctrl-C during a turn cancels it · ↑/↓ history · "
    "runs in the gateway: heartbeat and cron results arrive here as they come"
)
EVENT_WAIT_S = 25


def one_shot(
    client: GatewayClient,
    session: str,
    message: str,
    as_json: bool,
    files: list[dict[str, str]] | None = None,
) -> None:
    body: dict[str, Any] = {"text": message, "session": session}
    if files:
        body["files"] = files  # taken in by the gateway (docs/media.md)
    try:
        data = call(client, "POST", "/api/v1/chat", body)
    except KeyboardInterrupt:  # the connection closes with us: the gateway cancels the turn
        fail("cancelled", 130)
    _show_notices(data)
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


def interactive(
    client: GatewayClient,
    session: str,
    home: Path,
    *,
    compact: Callable[[], Awaitable[str]] | None = None,
    files: list[dict[str, str]] | None = None,
) -> None:
    """The interactive chat through the gateway; ``files`` go with the first message."""
    from rich.console import Console

    from vikingbot.cli.chat_input import make_reader
    from vikingbot.cli.chat_loop import ChatTerminal

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
    term = ChatTerminal(console, make_reader(console, home))
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C at a plain (piped) prompt
        asyncio.run(_attached(client, term, session, int(latest["last"]), compact, files))


async def _attached(
    client: GatewayClient,
    term: ChatTerminal,
    session: str,
    after: int,
    compact_here: Callable[[], Awaitable[str]] | None = None,
    files: list[dict[str, str]] | None = None,
) -> None:
    import httpx
    from rich.markup import escape

    from vikingbot.cli.chat_loop import run_chat
    from vikingbot.errors import VikingbotError

    async with httpx.AsyncClient(
        base_url=client.base_url, headers=client.headers(), timeout=None
    ) as http:

        def retried(line: str) -> None:
            term.note(f"[yellow]  ↻ {escape(line)}[/]")

        async def asked(event: dict[str, Any]) -> None:
            await _answer_ask(http, term, session, event)

        pending = list(files or [])

        async def send(text: str) -> Reply:
            sent = pending.copy()
            pending.clear()  # the files go with the first message
            data = await _post_chat(http, text, session, retried, asked, sent)
            for line in data.get("notices") or []:
                term.console.print(f"[cyan]{escape(str(line))}[/]", highlight=False)
            _show_extras(term.console, data)
            return _reply(data)

        async def compact() -> None:  # the fold runs here, on the session file
            if compact_here is None:
                term.console.print(f"[dim]run `vikingbot sessions compact {escape(session)}`[/]")
                return
            try:
                term.console.print(f"[dim]{escape(await compact_here())}[/]")
            except VikingbotError as exc:
                term.console.print(f"[red]{escape(str(exc))}[/]")

        follower = asyncio.create_task(_follow(http, term, after))
        try:
            await run_chat(term, send, help_text=HELP, commands={"/compact": compact})
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower


async def _answer_ask(
    http: httpx.AsyncClient, term: ChatTerminal, session: str, event: dict[str, Any]
) -> None:
    """Ask the person (``Allow tool {args}? [y/N]``) and tell the gateway; no answer in time
    is a no."""
    tool, preview = str(event.get("tool", ""))[:100], str(event.get("preview", ""))[:300]
    timeout = event.get("timeout_s")
    wait = float(timeout) if isinstance(timeout, int | float) and timeout > 0 else 300.0
    try:
        answer = await asyncio.wait_for(term.ask(f"{tool} {preview}"), max(1.0, wait - 1.0))
        yes = answer.strip().lower() in ("y", "yes")
    except TimeoutError:
        term.note("[yellow]  no answer in time: denied[/]")
        yes = False
    body = {"session": session, "id": str(event.get("id", ""))[:20], "yes": yes}
    await http.post("/api/v1/chat/answer", json=body)


async def _post_chat(
    http: httpx.AsyncClient,
    text: str,
    session: str,
    on_retry: Callable[[str], None],
    on_ask: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    files: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """One turn through the gateway, streamed: retry lines as they come, then the result."""
    import httpx

    from vikingbot.gateway.client import GatewayRefused, GatewayUnavailable

    body: dict[str, Any] = {"text": text, "session": session, "stream": True}
    if files:
        body["files"] = files
    try:
        async with http.stream("POST", "/api/v1/chat", json=body) as resp:
            if not resp.headers.get("content-type", "").startswith("application/x-ndjson"):
                data = _json(await resp.aread())  # an error, or a gateway that does not stream
            else:
                data = None
                async for line in resp.aiter_lines():
                    event = _json(line.encode())
                    if event is None:
                        continue
                    kind = event.pop("event", None)
                    if kind == "retry":
                        on_retry(str(event.get("text", ""))[:300])
                    elif kind == "ask" and on_ask is not None:
                        await on_ask(event)
                    elif kind in ("result", "error"):
                        data = event
                        break
    except httpx.HTTPError as exc:
        raise GatewayUnavailable(
            f"the gateway stopped answering ({type(exc).__name__}); it may have stopped: "
            "check `vikingbot status` and its log"
        ) from None
    status = int(data.get("status", 200)) if isinstance(data, dict) and "status" in data else 0
    if resp.status_code >= 400 or status >= 400 or not isinstance(data, dict):
        message = data.get("error") if isinstance(data, dict) else None
        code = status or resp.status_code
        raise GatewayRefused(code, str(message or f"HTTP {code} (no answer)"))
    return data


def _show_notices(data: Any) -> None:
    """What the gateway told the person about their files (a refusal, what was heard)."""
    from rich.console import Console
    from rich.markup import escape

    notices = data.get("notices") if isinstance(data, dict) else None
    if notices:
        err = Console(stderr=True)
        for line in notices:
            err.print(f"[cyan]{escape(str(line))}[/]", highlight=False)


def _json(raw: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _reply(data: dict[str, Any]) -> Reply:
    from vikingbot.cli.chat_loop import Reply

    def num(key: str) -> float:
        value = data.get(key)
        return float(value) if isinstance(value, int | float) else 0.0

    reply = data.get("reply")
    error = data.get("error")
    return Reply(
        text=reply if isinstance(reply, str) else None,
        ended=str(data.get("ended") or "final"),
        error=error if isinstance(error, str) else None,
        model_calls=int(num("model_calls")),
        tokens=int(num("tokens_in") + num("tokens_out")),
        cost_usd=num("cost_usd"),
    )


def _show_extras(console: Console, data: dict[str, Any]) -> None:
    """What the agent sent to this chat, and the tool calls the turn made."""
    from rich.markdown import Markdown
    from rich.markup import escape
    from rich.panel import Panel

    for text in data.get("messages") or []:
        console.print(Panel(Markdown(str(text)), title="message", border_style="cyan"))
    for c in data.get("tool_calls") or []:
        if not isinstance(c, dict):
            continue
        mark = "refused" if not c.get("approved") else ("error" if c.get("error") else "✓")
        console.print(f"[dim]  ⚙ {escape(str(c.get('name'))[:100])}  {mark}[/]")


async def _follow(http: httpx.AsyncClient, term: ChatTerminal, after: int) -> None:
    """Print new inbox items (heartbeat and cron results) until cancelled."""
    import httpx
    from rich.markdown import Markdown
    from rich.markup import escape
    from rich.panel import Panel

    while True:
        try:
            resp = await http.get(
                "/api/v1/events", params={"after": after, "wait": EVENT_WAIT_S}, timeout=60
            )
        except httpx.HTTPError as exc:
            why = f"the gateway stopped answering ({type(exc).__name__})"
            await term.say(f"[yellow]stopped following results: {escape(why)}[/]")
            return
        data = _json(resp.content)
        if resp.status_code >= 400 or data is None:
            why = str((data or {}).get("error") or f"HTTP {resp.status_code}")[:300]
            if resp.status_code == 503:  # our long poll was cut short by the gateway's stop
                why = "the gateway is stopping"
            await term.say(f"[yellow]stopped following results: {escape(why)}[/]")
            return
        for item in data.get("items") or []:
            if not isinstance(item, dict) or item.get("kind") == "prompt":
                continue
            title = escape(f"#{item.get('id')} from {item.get('source') or item.get('slot')}")
            await term.say(Panel(Markdown(str(item.get("text", ""))), title=title))
        with contextlib.suppress(TypeError, ValueError):
            after = max(after, int(data.get("last", after)))
