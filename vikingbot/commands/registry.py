"""The chat commands: one registry, each command written once, parsed by one total parser.

A command is a line that starts with ``/`` and names a registered command
(``/model gpt-4o``, ``/new@viking_bot`` in a Telegram group). It is answered by
the gateway itself: it never reaches the model and costs no model call. Any other
text, including ``/etc/hosts`` or an unknown ``/word``, is an ordinary message.
The terminal, every chat channel and the native menus (Telegram ``setMyCommands``)
read this one registry.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

MAX_ARGS = 8
MAX_ARG_CHARS = 200
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
_YES = frozenset({"yes", "y", "ok", "approve", "allow", "👍"})
_NO = frozenset({"no", "n", "deny", "refuse", "👎"})


@dataclass(frozen=True)
class Invocation:
    """A parsed command line: its name (lower case, without the ``@bot`` suffix) and arguments."""

    name: str
    args: tuple[str, ...]


Handler = Callable[[Any], Awaitable[str]]
"""``handler(call)``: a ``commands.types.CommandCall`` in, the answer's text out."""


@dataclass(frozen=True)
class Command:
    """One chat command: ``owner_only`` ones change other chats or the heartbeat."""

    name: str
    summary: str
    handler: Handler
    usage: str = ""
    aliases: tuple[str, ...] = ()
    owner_only: bool = False


def parse(text: str) -> Invocation | None:
    """``/name[@bot] args...`` as an :class:`Invocation`, or None for any other text. Total,
    linear: at most ``MAX_ARGS`` arguments of ``MAX_ARG_CHARS`` characters are kept."""
    if not isinstance(text, str):
        return None
    line = text.strip()
    if not line.startswith("/") or len(line) < 2:
        return None
    head, _, rest = line[1:].partition("\n")[0].partition(" ")
    name = head.split("@", 1)[0].lower()
    if _NAME.fullmatch(name) is None:
        return None
    args = tuple(a[:MAX_ARG_CHARS] for a in rest.split(maxsplit=MAX_ARGS)[:MAX_ARGS])
    return Invocation(name, args)


def yes_or_no(text: str) -> bool | None:
    """A plain reply to an approval question: True for yes, False for no, None otherwise."""
    if not isinstance(text, str) or len(text) > 20:
        return None
    word = text.strip().strip(".!").lower()
    return True if word in _YES else False if word in _NO else None


class Registry:
    """The commands, by name and alias (built once by ``vikingbot.commands.builtin``)."""

    def __init__(self, commands: list[Command]) -> None:
        self.commands = list(commands)
        self._by_name: dict[str, Command] = {}
        for c in commands:
            for n in (c.name, *c.aliases):
                if n in self._by_name or _NAME.fullmatch(n) is None:
                    raise ValueError(f"command name {n!r} is taken or not a valid name")
                self._by_name[n] = c

    def find(self, text: str) -> tuple[Command, Invocation] | None:
        """The command ``text`` invokes, or None when it is not a known command."""
        inv = parse(text)
        if inv is None:
            return None
        command = self._by_name.get(inv.name)
        return None if command is None else (command, inv)

    def menu(self) -> list[tuple[str, str]]:
        """``(name, summary)`` for native command menus (Telegram ``setMyCommands``)."""
        return [(c.name, c.summary[:256]) for c in self.commands]

    def help(self, *, owner: bool) -> str:
        lines = ["Commands:"]
        for c in self.commands:
            if c.owner_only and not owner:
                continue
            alias = f" (or /{' /'.join(c.aliases)})" if c.aliases else ""
            usage = f" {c.usage}" if c.usage else ""
            lines.append(f"/{c.name}{usage}{alias}: {c.summary}")
        return "\n".join(lines)
