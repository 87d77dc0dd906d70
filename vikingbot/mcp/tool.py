"""A server's tool as a ``tools.base.Tool``: what the loop offers, approves and runs.

Never read-only, whatever the server's ``readOnlyHint`` says (a server can say
anything): attended turns ask, unattended ones run it only when
``bot.heartbeat.safe_tools`` names it (``agent.approval``). ``server`` and
``identity`` are what the approval binds to. A server's ``isError`` result reaches
the model as the tool's error text; a server that is gone fails this call only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from vikingbot.errors import McpError, ToolError
from vikingbot.mcp.pins import Pins, fingerprint
from vikingbot.mcp.types import McpAction
from vikingbot.tools.base import Tool, ToolContext

Call = Callable[[str, str, dict[str, Any]], Awaitable[tuple[str, bool]]]


class McpTool(Tool):
    """One tool of one MCP server, under its ``mcp_<server>_<tool>`` name."""

    read_only = False

    def __init__(
        self,
        name: str,
        *,
        server: str,
        tool: str,
        identity: str,
        description: str,
        parameters: dict[str, Any],
        call: Call,
        pins: Pins,
    ) -> None:
        self.name = name  # type: ignore[misc]
        self.description = f"[MCP {server}] {description}".strip()  # type: ignore[misc]
        self.parameters = _object_schema(parameters)  # type: ignore[misc]
        self.server = server
        self.tool = tool
        self.identity = identity
        self._call = call
        self._pins = pins

    def action(self) -> McpAction:
        """What this call is, for the approval rule (``agent.approval``)."""
        return McpAction(self.server, self.tool, self.identity, self._pins.get(self.server))

    def pin(self) -> None:
        """Record that approvals of this server are for it as configured now."""
        if self._pins.get(self.server) is None:
            self._pins.set(self.server, fingerprint(self.identity))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            text, is_error = await self._call(self.server, self.tool, args)
        except McpError as exc:
            raise ToolError(str(exc)) from None
        if is_error:
            raise ToolError(f"{self.name}: {text}")
        return text


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The server's input schema, or an empty object schema when it sent none usable."""
    if schema.get("type") == "object":
        return schema
    return {"type": "object", "properties": {}}
