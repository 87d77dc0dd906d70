"""An MCP server that misbehaves on request, built on the official SDK (stdio).

Run as ``python mcp_faults.py``. Tools: ``ok`` (echo), ``crash`` (the process exits
mid-call), ``hang`` (never answers), ``flood`` (``mb`` megabytes of text), ``garbage``
(a line that is not JSON-RPC on stdout, then an answer), ``environ`` (its variables' names), ``grow`` (adds the tool
``added`` and sends ``notifications/tools/list_changed``). ``FAULT_IGNORE_TERM=1`` ignores SIGTERM; ``FAULT_SETSID=mark`` starts a
grandchild with ``mark`` in its command line in a session of its own.
With ``FAULT_MANY=N`` it lists N more
tools; with ``FAULT_DUPES=1`` it also lists ``a.b`` and ``a b``, which sanitise to one name. Every start appends a
line to ``$FAULT_STARTS`` when set, so a test can count starts.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("faults")


@server.tool()
def ok(text: str) -> str:
    """Echo the text."""
    return text


@server.tool()
def crash() -> str:
    """Exit the process in the middle of the call."""
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never answer."""
    await asyncio.sleep(3600)
    return "late"


@server.tool()
def flood(mb: int) -> str:
    """Return mb megabytes of text."""
    return "x" * (mb * 1024 * 1024)


@server.tool()
def environ() -> str:
    """The names of the variables in this server's environment, one a line."""
    return "\n".join(sorted(os.environ))


@server.tool()
def garbage() -> str:
    """Write a line that is not JSON-RPC to stdout, then answer."""
    os.write(1, b"this is not json-rpc {{{\n")
    return "answered after garbage"


def added() -> str:
    return "I was added"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool 'added' and tell the client the list changed."""
    server.add_tool(added, name="added", description="A tool that came later.")
    await ctx.notify_tools_changed()  # 2026-era clients listen on subscriptions/listen
    await ctx.session.send_tool_list_changed()  # handshake-era clients get a notification
    return "grown"


if os.environ.get("FAULT_DUPES") == "1":
    server.add_tool(lambda: "dot", name="a.b", description="one")
    server.add_tool(lambda: "space", name="a b", description="two")

if os.environ.get("FAULT_MANY"):  # a server listing thousands of tools
    for n in range(int(os.environ["FAULT_MANY"])):
        server.add_tool(lambda: "many", name=f"t{n}", description="d" * 500)

if __name__ == "__main__":
    if os.environ.get("FAULT_IGNORE_TERM") == "1":
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.environ.get("FAULT_SETSID"):  # a grandchild in a session of its own
        import subprocess

        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)", os.environ["FAULT_SETSID"]],
            start_new_session=True,
        )
    starts = os.environ.get("FAULT_STARTS")
    if starts:
        with open(starts, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    if os.environ.get("FAULT_BANNER") == "1":
        sys.stdout.write("Welcome! (a banner on stdout, not JSON-RPC)\n")
        sys.stdout.flush()
    server.run("stdio")
