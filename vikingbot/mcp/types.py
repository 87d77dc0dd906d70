"""The records the MCP part shares: a listed tool, a server's state and status."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

State = Literal["stopped", "starting", "running", "failed", "disabled"]


class Listed(NamedTuple):
    """One tool as the server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ServerStatus(NamedTuple):
    """What ``vikingbot mcp list``, ``/health`` and ``doctor`` show of one server."""

    name: str
    kind: str
    identity: str  # command line or URL, secrets masked
    state: State
    tools: int
    starts: int
    problem: str | None


class McpAction(NamedTuple):
    """What an MCP tool call is, for the approval rule: which server (as configured) and
    which of its tools; ``pinned`` is the fingerprint approvals of it were given for."""

    server: str
    tool: str
    identity: str
    pinned: str | None
