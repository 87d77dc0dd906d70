"""Tool names as the model sees them: ``mcp_<server>_<tool>`` (pure).

Providers accept ``[A-Za-z0-9_-]{1,64}``; anything else in a server's or a tool's
name becomes ``_``, and a name longer than 64 characters keeps its first 55 and a
short digest of the whole. Two tools that would get one name are both refused,
with a problem naming both: the model could not tell them apart, and a guess could
run the wrong one. ``enabled_tools`` entries may be a server's raw tool name or
the wrapped one; ``*`` lets every tool through.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import NamedTuple

MAX_NAME = 64
_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class Named(NamedTuple):
    """One server tool under the name the model sees."""

    name: str
    server: str
    tool: str  # the server's own name for it


def sanitise(part: str) -> str:
    """``part`` with every character a provider refuses replaced by ``_``."""
    return "".join(c if c in _ALLOWED else "_" for c in part[:200]) or "_"


def tool_name(server: str, tool: str) -> str:
    """``mcp_<server>_<tool>``, sanitised and at most 64 characters."""
    full = f"mcp_{sanitise(server)}_{sanitise(tool)}"
    if len(full) <= MAX_NAME:
        return full
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{full[: MAX_NAME - 9]}_{digest}"


def server_prefix(server: str) -> str:
    """What every tool name of ``server`` starts with (``mcp_<server>_``)."""
    return f"mcp_{sanitise(server)}_"


def enabled(server: str, tool: str, allowed: Iterable[str]) -> bool:
    """Whether ``enabled_tools`` lets the server's ``tool`` through."""
    wrapped = tool_name(server, tool)
    return any(a == "*" or a in (tool, wrapped) for a in allowed)


def name_tools(listed: Iterable[tuple[str, str]]) -> tuple[list[Named], list[str]]:
    """Names for (server, tool) pairs, and a problem for each pair of tools sharing one.

    Names already taken by vikingbot's own tools are never produced (they do not
    start with ``mcp_``).
    """
    by_name: dict[str, list[tuple[str, str]]] = {}
    for server, tool in listed:
        by_name.setdefault(tool_name(server, tool), []).append((server, tool))
    named: list[Named] = []
    problems: list[str] = []
    for name, owners in by_name.items():
        if len(owners) == 1:
            named.append(Named(name, *owners[0]))
            continue
        who = " and ".join(f"tool {t[:100]!a} of server {s!r}" for s, t in owners)
        problems.append(f"{who} would both be called {name}; neither is offered")
    return named, problems


def names_a_tool_of(entry: str, server: str) -> bool:
    """Whether a ``safe_tools`` entry names a tool of ``server`` (or all of them), with the
    server's name exactly as configured: ``mcp_<server>_*``, ``mcp__<server>__*``,
    ``mcp__<server>__<tool>`` (no ``__`` in the tool), or ``mcp_<server>_<tool>``
    where ``<server>`` needs no sanitising (the model's name for it)."""
    entry = entry.strip()
    if entry in (f"mcp_{server}_*", f"mcp__{server}__*"):
        return True
    acp = f"mcp__{server}__"
    if entry.startswith(acp):
        rest = entry[len(acp) :]
        return bool(rest) and "__" not in rest and rest != "*"
    plain = f"mcp_{server}_"
    return server_prefix(server) == plain and entry.startswith(plain) and len(entry) > len(plain)
