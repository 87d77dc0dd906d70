"""The bot as an MCP server (official ``mcp`` SDK, server side): stdio and Streamable HTTP.

:func:`build_server` registers the :class:`~vikingbot.mcp_server.door.BotDoor`
tools on an ``MCPServer``; who is calling comes from :data:`CALLER` (stdio: the
local user, set once; HTTP: the client whose token the request carried).
:class:`HttpDoor` is the gateway's ``/mcp`` endpoint: it checks the bearer token
(a client token with the ``mcp`` scope, ``vikingbot api token add``), then hands
the request to the SDK's stateless Streamable HTTP transport (JSON answers, no
session state between requests), whose task group it starts on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.errors import VikingbotError
from vikingbot.mcp_server.door import BotDoor, Caller

if TYPE_CHECKING:
    from vikingbot.openai_api.tokens import TokenStore

CALLER: ContextVar[Caller | None] = ContextVar("mcp_caller", default=None)
INSTRUCTIONS = (
    "vikingbot, a personal agent with a heartbeat checklist (HEARTBEAT.md per workspace). "
    "Read its inbox, see and explain what the heartbeat will do (heartbeat_plan), add or "
    "complete checklist entries, run a cycle now, message the owner, search chat history."
)


def build_server(door: BotDoor) -> Any:
    """An ``MCPServer`` with the bot's tools."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("vikingbot", instructions=INSTRUCTIONS)

    from mcp.server.mcpserver.exceptions import ToolError

    async def call(tool: str, **args: Any) -> str:
        caller = CALLER.get() or Caller("unknown", write=False)
        try:
            result = await door.call(caller, tool, args)
        except VikingbotError as exc:  # refused or failed: the client reads why
            raise ToolError(str(exc)) from None
        return json.dumps(result, default=str, ensure_ascii=False)

    @server.tool(description="Items delivered to the bot's inbox (newest first).")
    async def read_inbox(slot: str | None = None, unread_only: bool = True, limit: int = 20) -> str:
        return await call("read_inbox", slot=slot, unread_only=unread_only, limit=limit)

    @server.tool(
        description="What the heartbeat would do now for each HEARTBEAT.md entry, and why "
        "(due, not due, parked, ...), optionally for one workspace."
    )
    async def heartbeat_plan(workspace: str | None = None) -> str:
        return await call("heartbeat_plan", workspace=workspace)

    @server.tool(
        description="Add an entry to a workspace's HEARTBEAT.md (end of Active Tasks), "
        "e.g. 'every: 1h Check the build'. Needs the mcp-write scope."
    )
    async def add_heartbeat_entry(workspace: str, text: str) -> str:
        return await call("add_heartbeat_entry", workspace=workspace, text=text)

    @server.tool(
        description="Move an open HEARTBEAT.md entry (given by its text) to Completed. "
        "Needs the mcp-write scope."
    )
    async def complete_heartbeat_entry(workspace: str, entry: str) -> str:
        return await call("complete_heartbeat_entry", workspace=workspace, entry=entry)

    @server.tool(description="Run one heartbeat cycle now. Needs the mcp-write scope.")
    async def run_heartbeat_now(workspace: str | None = None) -> str:
        return await call("run_heartbeat_now", workspace=workspace)

    @server.tool(description="Send a message to the bot's owner. Needs the mcp-write scope.")
    async def message_owner(text: str) -> str:
        return await call("message_owner", text=text)

    @server.tool(description="Search the bot's chat history (words match by prefix).")
    async def search_history(query: str, limit: int = 10) -> str:
        return await call("search_history", query=query, limit=limit)

    return server


async def serve_stdio(door: BotDoor, caller: Caller) -> None:
    """Serve on stdin/stdout until the client closes them."""
    CALLER.set(caller)
    await build_server(door).run_stdio_async()


class HttpDoor:
    """ASGI app for ``/mcp`` on the gateway (see the module docstring)."""

    def __init__(self, door: BotDoor, tokens: TokenStore) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.tokens = tokens
        self.server = build_server(door)
        # the gateway's own Host/Origin checks (webguard) run before this app
        self.manager = StreamableHTTPSessionManager(
            app=self.server._lowlevel_server, json_response=True, stateless=True
        )
        self._ready: asyncio.Event | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        assert self._ready is not None
        async with self.manager.run():
            self._ready.set()
            await self._stop.wait()

    async def _started(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="mcp-http")
        await self._ready.wait()

    async def aclose(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.responses import JSONResponse

        if scope["type"] != "http":
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"").decode("latin-1")
        token = given[7:].strip() if given[:7].lower() == "bearer " else ""
        client = self.tokens.check(token) if token else None
        if client is None or not client.allows("mcp"):
            why = "missing or wrong token" if client is None else "the token lacks the mcp scope"
            logger.warning("MCP server: refused a request: {}", why)
            body = {"error": f"{why} (vikingbot api token add NAME --scope mcp)"}
            await JSONResponse(body, status_code=401 if client is None else 403)(
                scope, receive, send
            )
            return
        await self._started()
        token_var = CALLER.set(Caller(client.name, write=client.allows("mcp-write")))
        try:
            await self.manager.handle_request(scope, receive, send)
        finally:
            CALLER.reset(token_var)
