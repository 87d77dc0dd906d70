"""The interactive chat loop, shared by `vikingbot chat` in the terminal and attached
to a running gateway.

The loop reads a line (``chat_input``), runs the slash commands, and otherwise
hands the text to a *send turn* callable (``SendTurn``: text in, ``Reply`` out)
which runs the turn here (``chat_cmd``) or in the gateway (``chat_remote``).
While a turn runs, a spinner shows the elapsed time; Ctrl-C cancels the turn at
once (the callable's task is cancelled: the local loop keeps the prompt in the
session, the remote one drops the HTTP request and the gateway cancels the turn)
and the prompt comes back. At the prompt, Ctrl-C or Ctrl-D quits. Each failure
is printed once, as ``Error: ...``.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.status import Status
    from rich.text import Text

    from vikingbot.cli.chat_input import LineReader

SPINNER_LABEL = "working"
LIMIT_NOTE = "stopped at the tool-call limit (bot.agents.max_tool_iterations)"


@dataclass
class Reply:
    """What a turn produced, in the terms the chat shows."""

    text: str | None
    ended: str = "final"  # final | turn-limit | error | timeout
    error: str | None = None
    model_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


SendTurn = Callable[[str], Awaitable[Reply]]
Command = Callable[[], Awaitable[None]]


class _Elapsed:
    """The spinner's text: re-rendered on each refresh, so the seconds count up."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.start = time.monotonic()

    def __rich__(self) -> Text:
        from rich.text import Text

        return Text(f"{self.label} · {time.monotonic() - self.start:.0f}s", style="dim")


class ChatTerminal:
    """The chat's screen and keyboard: input, output above the prompt, the spinner."""

    def __init__(self, console: Console, reader: LineReader) -> None:
        self.console = console
        self.reader = reader
        self._status: Status | None = None

    async def say(self, *renderables: RenderableType) -> None:
        """Print, also while the prompt is showing (it is redrawn below)."""
        from prompt_toolkit.application import run_in_terminal

        await run_in_terminal(lambda: self.console.print(*renderables))

    def note(self, markup: str) -> None:
        """A line printed during a turn (above the spinner)."""
        self.console.print(markup, highlight=False)

    async def ask(self, question: str) -> str:
        """A question in the middle of a turn (approval): the spinner pauses for it."""
        status = self._status
        if status is not None:
            status.stop()
        try:
            return await self.reader.answer(question)
        finally:
            if status is not None:
                status.start()

    @contextmanager
    def spinner(self, label: str = SPINNER_LABEL) -> Iterator[None]:
        status = self.console.status(_Elapsed(label), spinner="dots")
        self._status = status
        status.start()
        try:
            yield
        finally:
            self._status = None
            status.stop()

    async def run_turn(self, turn: Awaitable[Reply]) -> Reply | None:
        """Run ``turn`` with the spinner; ``None`` when Ctrl-C cancelled it."""
        task = asyncio.ensure_future(turn)
        with _ctrl_c_cancels(task), self.spinner():
            try:
                return await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    task.cancel()  # we are being stopped ourselves: stop the turn too
                    raise
                if task.cancelled():
                    return None
                raise


@contextmanager
def _ctrl_c_cancels(task: asyncio.Future[Any]) -> Iterator[None]:
    """While the block runs, SIGINT (Ctrl-C) cancels ``task`` instead of the program."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()

    def cancel(signum: int, frame: Any) -> None:
        loop.call_soon_threadsafe(task.cancel)

    previous = signal.signal(signal.SIGINT, cancel)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def say_error(console: Console, message: str) -> None:
    """The one line a failure gets (secrets masked, as everywhere in the CLI)."""
    from rich.markup import escape

    from vikingbot.redact import mask_text

    console.print(f"[bold red]Error:[/] {escape(mask_text(message))}", highlight=False)


def show_reply(console: Console, r: Reply) -> None:
    from rich.markdown import Markdown

    if r.ended in ("error", "timeout"):
        say_error(console, r.error or r.ended)
        return
    if r.text:
        console.print(Markdown(r.text))
    if r.ended == "turn-limit":
        console.print(f"[yellow]{LIMIT_NOTE}[/]")
    if r.model_calls:
        cost = f" · ${r.cost_usd:.4f}" if r.cost_usd else ""
        console.print(f"[dim]{r.model_calls} model call(s) · {r.tokens} tokens{cost}[/]")


async def run_chat(
    term: ChatTerminal,
    send: SendTurn,
    *,
    help_text: str,
    commands: dict[str, Command] | None = None,
) -> None:
    """Read, send, show, until ``/exit``, Ctrl-D or Ctrl-C at the prompt."""
    from vikingbot.errors import VikingbotError

    console = term.console
    commands = commands or {}
    while True:
        try:
            line = await term.reader.line()
        except (EOFError, KeyboardInterrupt):
            console.print()
            return
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return
        if text == "/help":
            console.print(f"[dim]{help_text}[/]")
            continue
        if text in commands:
            await commands[text]()
            continue
        try:
            reply = await term.run_turn(send(text))
        except VikingbotError as exc:
            say_error(console, str(exc))
            continue
        if reply is None:
            console.print("[yellow]turn cancelled[/]")
            continue
        show_reply(console, reply)
