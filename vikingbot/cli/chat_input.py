"""Reading the chat's lines: prompt_toolkit on a terminal, plain lines from a pipe.

On a terminal (stdin and stdout both a TTY) lines are read with prompt_toolkit:
line editing (arrows, Home/End, Ctrl-A/E/W/U/K, Alt-B/F), Up/Down and Ctrl-R
through the history, which is kept per home in ``<home>/state/chat_history``
(mode 0600: what you type may be private; at most ``HISTORY_KEEP`` entries are
kept). Anything else (a pipe, a script, a test's stdin) is read line by line
without editing or history.

Both readers raise ``EOFError`` at the end of input (Ctrl-D) and
``KeyboardInterrupt`` for Ctrl-C at the prompt; the chat loop decides what they mean.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rich.console import Console

HISTORY_FILE = Path("state") / "chat_history"
HISTORY_KEEP = 1000  # entries kept when the file is tidied at start
PROMPT = "you› "


class LineReader(Protocol):
    """Where the chat's input comes from."""

    async def line(self) -> str:
        """The next line the user typed at the chat prompt."""
        ...

    async def answer(self, question: str) -> str:
        """The answer to a question asked in the middle of a turn (approval); no history."""
        ...


def history_path(home: Path) -> Path:
    return home / HISTORY_FILE


def prepare_history(path: Path, keep: int = HISTORY_KEEP) -> None:
    """Create the history file private (0700 folder, 0600 file) and keep its newest ``keep``
    entries. A file that cannot be read as history is left alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(path.parent, 0o700)
    fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    # prompt_toolkit's FileHistory: each entry is "\n# <time>\n+line\n+line\n"
    entries = text.split("\n# ")
    if len(entries) - 1 <= 2 * keep:  # tidy only when well over, so not on every start
        return
    kept = "\n# " + "\n# ".join(entries[-keep:])
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(kept)
    os.replace(tmp, path)


def is_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def make_reader(console: Console, home: Path | None) -> LineReader:
    """prompt_toolkit with history on a terminal, plain lines otherwise."""
    if is_terminal():
        return ToolkitReader(history_path(home) if home is not None else None)
    return PlainReader(console)


class ToolkitReader:
    """Line editing and a persistent history (prompt_toolkit)."""

    def __init__(self, history: Path | None) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        store: FileHistory | InMemoryHistory = InMemoryHistory()
        if history is not None:
            try:
                prepare_history(history)
                store = FileHistory(str(history))
            except OSError:
                store = InMemoryHistory()  # a read-only home: edit lines, keep no history
        self._session: PromptSession[str] = PromptSession(history=store)
        self._asker: PromptSession[str] = PromptSession()

    async def line(self) -> str:
        return await self._session.prompt_async([("bold ansicyan", PROMPT)])

    async def answer(self, question: str) -> str:
        # plain text fragments: a model-chosen argument cannot smuggle escape codes in
        return await self._asker.prompt_async(
            [("bold ansiyellow", "Allow "), ("", f"{question}? [y/N] ")]
        )


class PlainReader:
    """One line at a time from stdin, read in a daemon thread so the event loop keeps
    running (results from the gateway, Ctrl-C) while it waits. A read that was given
    up (Ctrl-C during a question) is handed to the next caller, so no line is lost."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._pending: concurrent.futures.Future[str] | None = None

    async def _read(self) -> str:
        if self._pending is None:
            pending: concurrent.futures.Future[str] = concurrent.futures.Future()

            def work() -> None:
                try:
                    pending.set_result(sys.stdin.readline())
                except (OSError, ValueError) as exc:  # a closed stdin
                    pending.set_exception(EOFError(str(exc)))

            threading.Thread(target=work, name="chat-stdin", daemon=True).start()
            self._pending = pending
        line = await asyncio.shield(asyncio.wrap_future(self._pending))
        self._pending = None
        if not line:
            raise EOFError
        return line.rstrip("\n")

    async def line(self) -> str:
        self._console.print(f"[bold cyan]{PROMPT}[/]", end="")
        return await self._read()

    async def answer(self, question: str) -> str:
        from rich.markup import escape

        self._console.print(f"[bold yellow]Allow[/] {escape(question)}? \\[y/N] ", end="")
        return await self._read()
