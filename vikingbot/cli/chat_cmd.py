"""`vikingbot chat`: talk to the agent in the terminal, or send one message (`-m`).

Interactive mode keeps the conversation in a session (default
``cli:default:local``, created with ``skip_heartbeat``). The loop itself
(line editing and history, the spinner, Ctrl-C, errors told once) is
``chat_loop``'s, shared with the chat attached to a gateway (``chat_remote``);
this module gives it the *send turn* callable that runs the turn here. Replies
are rendered as Markdown, each tool call is shown, a tool that changes things
asks ``Allow exec(...)? [y/N]`` first, and each retry of the model SDK is one
line (``providers.sdk_retries``). ``-m`` sends one message and prints the reply
(``--json`` for scripts); it asks for approval only when stdin is a terminal,
otherwise such tools are refused (see ``bot.tools.auto_approve``).

Log lines of the agent layer never reach the terminal here (the chat prints
the turn's outcome itself, once); they go to ``<data>/logs/chat.log``, or to
stderr as well with ``-v``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vikingbot.cli.common import fail, get_config, print_json, state

if TYPE_CHECKING:
    from rich.console import Console

    from vikingbot.agent.types import AgentLoop, ApprovalCallback, ToolCallRecord, TurnResult
    from vikingbot.cli.chat_loop import ChatTerminal, Reply
    from vikingbot.delivery.service import Outgoing
    from vikingbot.gateway.compose import Home
    from vikingbot.session.types import SessionKey

DEFAULT_SESSION = "cli:default:local"
HELP = (
    "/exit, Ctrl-D or Ctrl-C quits · Ctrl-C during a turn cancels it · "
    "/reset clears this session's history · /compact folds older turns into a summary · "
    "↑/↓ history"
)


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)


def chat(
    ctx: typer.Context,
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="Send one message, print the reply.")
    ] = None,
    session: Annotated[
        str, typer.Option("--session", "-s", help="Session key (type:channel:chat).")
    ] = DEFAULT_SESSION,
    as_json: Annotated[
        bool, typer.Option("--json", help="With -m: print the turn as JSON.")
    ] = False,
    attach: Annotated[
        list[Path] | None,
        typer.Option(
            "--attach", "-a", help="Send a file with the message (a picture, audio, a document)."
        ),
    ] = None,
) -> None:
    """Chat with your agent (interactive), or send one message with -m."""
    from vikingbot.errors import SessionError
    from vikingbot.session.types import SessionKey

    if as_json and message is None:
        fail("--json needs -m/--message", 2)
    try:
        key = SessionKey.parse(session)
    except SessionError as exc:
        fail(str(exc), 2)
    from vikingbot.cli.remote import gateway_client, note_local

    files: list[Path] = []
    if attach:
        from vikingbot.cli.chat_attach import check_files

        files = check_files(attach)
    client = gateway_client(ctx)
    if client is not None:  # the turn runs in the gateway, files and all
        from vikingbot.cli.chat_attach import encoded_files
        from vikingbot.cli.chat_remote import interactive, one_shot

        sent = encoded_files(files) if files else []
        if message is not None:
            one_shot(client, str(key), message, as_json, sent)
        else:
            from vikingbot.config.paths import home_dir

            interactive(
                client, str(key), home_dir(), compact=lambda: _compact_here(ctx, key), files=sent
            )
        return
    if (message is None or not as_json) and not files:
        note_local()
    rt = _home(ctx, key)
    try:
        if message is not None:
            _one_shot(rt, key, message, as_json, files)
        else:
            _interactive(rt, key, files)
    finally:
        rt.close()


async def _compact_here(ctx: typer.Context, key: SessionKey) -> str:
    """``/compact`` in a chat attached to a gateway: the fold runs here, on the session
    file (``SessionStore.append_counted`` keeps the gateway's turns meanwhile)."""
    rt = _home(ctx, key)
    loop = rt.new_agent()
    try:
        return await loop.compact(key)
    finally:
        await loop.aclose()
        rt.close()


def _home(ctx: typer.Context, key: SessionKey) -> Home:
    from vikingbot.errors import VikingbotError
    from vikingbot.gateway.compose import build_home

    config, paths = get_config(ctx)
    chat_logging(paths.logs_dir, verbose=state(ctx).verbose)
    rt = build_home(config, paths)
    try:
        rt.sessions.get_or_create(key, skip_heartbeat=True)
    except VikingbotError as exc:
        fail(str(exc))
    return rt


def chat_logging(logs_dir: Path, *, verbose: bool) -> None:
    """Logs for a chat: the agent layer's lines go to ``logs_dir/chat.log`` only (the chat
    tells the turn's outcome itself, once); other warnings still reach stderr. ``-v``
    shows everything on stderr too."""
    import sys

    from loguru import logger

    from vikingbot.logs import setup_logging

    try:
        setup_logging(verbose=verbose, logs_dir=logs_dir, console=verbose, log_name="chat.log")
    except OSError:  # a home we cannot write to: no log file then
        setup_logging(verbose=verbose, console=verbose)
    if not verbose:
        logger.add(
            sys.stderr,
            level="WARNING",
            format="{level}: {message}",
            filter=lambda record: not record["name"].startswith("vikingbot.agent"),
        )


def _loop(
    rt: Home, approve: ApprovalCallback | None, on_tool: Callable[[ToolCallRecord], None] | None
) -> AgentLoop:
    """The configured loop; exits 1 with what to set when it is not ready."""
    from vikingbot.errors import NotConfiguredError

    try:
        loop = rt.new_agent(approval_callback=approve, on_tool_call=on_tool)
    except NotConfiguredError as exc:
        fail(str(exc))
    ready = loop.readiness()
    if not ready.ready:
        fail(ready.problem or "the agent is not ready")
    return loop


def _deliver_to(console: Console) -> Any:
    """The delivery sink of a terminal chat: ``message`` tool output for it is printed here."""

    async def handler(item: Outgoing) -> bool:
        msg = item.message
        if msg.channel != "cli":
            console.print(
                f"[yellow]message for {msg.channel}:{msg.chat_id} not sent: chat has no "
                "connection to other channels (the gateway sends those)[/]"
            )
            return False
        from rich.markdown import Markdown
        from rich.panel import Panel

        console.print(Panel(Markdown(msg.text), title="message", border_style="cyan"))
        return True

    return handler


def _local_deliver(rt: Home, key: SessionKey, console: Console) -> Any:
    """The turn's deliverer: this chat's messages are printed, other targets go to
    delivery (no channels run here, so they wait in the inbox)."""
    from vikingbot.delivery.adapter import TurnDelivery

    async def to_terminal(text: str) -> Any:
        from rich.markdown import Markdown
        from rich.panel import Panel

        console.print(Panel(Markdown(text), title="message", border_style="cyan"))
        return "delivered"

    return TurnDelivery.for_chat(rt.delivery, key, sink=to_terminal)


def _say_unread(console: Console, unread: int) -> None:
    if unread:
        console.print(
            f"[yellow]{unread} unread inbox item(s)[/] [dim](vikingbot inbox)[/]", highlight=False
        )


def call_summary(name: str, args: dict[str, Any], width: int = 80) -> str:
    """``exec(command='ls -la')``: a tool call as one short line."""
    parts = []
    for k, v in args.items():
        text = repr(v)
        if len(text) > width:
            text = text[: width - 3] + "..."
        parts.append(f"{k}={text}")
    return f"{name}({', '.join(parts)})"


def _show_tool(console: Console, rec: ToolCallRecord) -> None:
    from rich.text import Text

    line = Text("  ⚙ ", style="dim")
    line.append(call_summary(rec.name, rec.arguments, 60), style="bold" if rec.approved else "dim")
    if not rec.approved:
        line.append("  refused", style="yellow")
    elif rec.error:
        first = rec.result.splitlines()[0] if rec.result else "error"
        line.append(f"  {first[:100]}", style="red")
    else:
        line.append("  ✓", style="green")
    console.print(line)


def _approver(term: ChatTerminal) -> ApprovalCallback:
    """Ask at the terminal (the spinner pauses); Ctrl-C or Ctrl-D there cancels the turn."""

    async def approve(name: str, args: dict[str, Any]) -> bool:
        import asyncio

        try:
            answer = await term.ask(call_summary(name, args))
        except (KeyboardInterrupt, EOFError):
            term.console.print()
            raise asyncio.CancelledError from None
        return answer.strip().lower() in ("y", "yes")

    return approve


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _one_shot(
    rt: Home, key: SessionKey, message: str, as_json: bool, files: list[Path] | None = None
) -> None:
    import asyncio

    from rich.console import Console

    from vikingbot.cli.chat_input import PlainReader
    from vikingbot.cli.chat_loop import ChatTerminal
    from vikingbot.errors import VikingbotError
    from vikingbot.providers.sdk_retries import reporting

    err = Console(stderr=True)
    term = ChatTerminal(err, PlainReader(err))  # the reply goes to stdout, the rest to stderr
    approve = _approver(term) if sys.stdin.isatty() else None
    loop = _loop(rt, approve, None if as_json else (lambda rec: _show_tool(err, rec)))
    rt.delivery.connect(_deliver_to(err))

    async def run() -> TurnResult:
        try:
            deliver = _local_deliver(rt, key, err)
            prompt, meta = message, dict[str, Any]()
            if files:
                from vikingbot.cli.chat_attach import with_files

                taken = await with_files(rt, key, files, message, err)
                if taken is None:
                    fail("nothing to send: every attached file was refused")
                prompt, meta = taken
            with term.spinner():  # shown only when stderr is a terminal
                result: TurnResult = await loop.run_turn(prompt, key, meta, deliver=deliver)
            return result
        finally:
            await loop.aclose()

    def retried(line: str) -> None:
        if not as_json:
            term.note(f"[yellow]  ↻ {_escape(line)}[/]")

    try:
        with reporting(retried):
            result = asyncio.run(run())
    except KeyboardInterrupt:
        fail("cancelled", 130)
    except VikingbotError as exc:  # e.g. a plugin loop's NotConfiguredError
        fail(str(exc))
    if as_json:
        from vikingbot.agent.dispatch import turn_json

        print_json({"via": "local", **turn_json(key, result)})
        if result.ended == "error":
            raise typer.Exit(1)
        return
    if result.ended == "error":
        fail(result.error or "the turn failed")
    if result.ended == "turn-limit":
        err.print("[yellow]stopped at the tool-call limit (bot.agents.max_tool_iterations)[/]")
    if result.ended == "timeout":
        fail(result.error or "the turn timed out")
    typer.echo(result.text or "")


def _interactive(rt: Home, key: SessionKey, files: list[Path] | None = None) -> None:
    import asyncio

    from rich.console import Console

    from vikingbot.cli.chat_input import make_reader
    from vikingbot.cli.chat_loop import ChatTerminal, run_chat
    from vikingbot.errors import VikingbotError
    from vikingbot.providers.sdk_retries import reporting

    console = Console()
    term = ChatTerminal(console, make_reader(console, rt.paths.home))
    loop = _loop(rt, _approver(term), lambda rec: _show_tool(console, rec))
    rt.delivery.connect(_deliver_to(console))
    model = rt.config.bot.agents.model or rt.config.bot.agents.provider
    console.print(f"[bold]vikingbot chat[/] · session {key} · {model}")
    console.print(f"[dim]{HELP}[/]")
    _say_unread(console, rt.delivery.inbox.unread_count())

    warm: list[asyncio.Task[None]] = []

    async def send(text: str) -> Reply:
        if warm:  # the first turn waits for the warm-up rather than racing it
            with contextlib.suppress(Exception):  # the turn itself will say what is wrong
                await asyncio.shield(warm[0])
        deliver = _local_deliver(rt, key, console)
        prompt, meta = text, dict[str, Any]()
        if files:  # the files go with the first message
            from vikingbot.cli.chat_attach import with_files

            taken = await with_files(rt, key, files, text, console)
            files.clear()
            if taken is not None:
                prompt, meta = taken
        return to_reply(await loop.run_turn(prompt, key, meta, deliver=deliver))

    async def reset() -> None:
        rt.sessions.reset(key)
        console.print("[dim]history cleared[/]")

    async def compact() -> None:  # /compact: the same fold as `vikingbot sessions compact`
        try:
            console.print(f"[dim]{_escape(await loop.compact(key))}[/]")
        except VikingbotError as exc:
            console.print(f"[red]{_escape(str(exc))}[/]")

    async def main() -> None:
        # import the model SDK (or start the agent process) while the user types
        warm.append(asyncio.create_task(_warm_up(loop)))
        try:
            await run_chat(
                term, send, help_text=HELP, commands={"/reset": reset, "/compact": compact}
            )
        finally:
            warm[0].cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await warm[0]
            await loop.aclose()

    with reporting(lambda line: term.note(f"[yellow]  ↻ {_escape(line)}[/]")):
        try:
            asyncio.run(main())
        except KeyboardInterrupt:  # Ctrl-C at a plain (piped) prompt
            console.print()


async def _warm_up(loop: AgentLoop) -> None:
    from loguru import logger

    try:
        await loop.start()
    except Exception as exc:  # the first turn tries again and reports it
        logger.info("chat: warming up the agent failed: {}", exc)


def to_reply(r: TurnResult) -> Reply:
    from vikingbot.cli.chat_loop import Reply

    return Reply(
        text=r.text,
        ended=r.ended,
        error=r.error,
        model_calls=r.model_calls,
        tokens=r.tokens_in + r.tokens_out,
        cost_usd=r.cost_usd,
    )
