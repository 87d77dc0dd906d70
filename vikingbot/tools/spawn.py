"""The ``spawn`` tool: start a sub-agent that works on a task in the background.

The turn's ``ToolContext.spawner`` (``agent.subagents.TurnSpawner``) does the work; this
module only checks the arguments. The answer is the sub-agent's id, at once; its result
arrives later: in this chat, or, for a heartbeat or cron turn, in the same run before
the turn ends (docs/agent.md). ``read_only``: starting one changes nothing, and the
sub-agent's own calls meet the same approval rules as its parent's, with no wider tools.
"""

from __future__ import annotations

from typing import Any, ClassVar

from vikingbot.errors import ToolError
from vikingbot.tools.base import Tool, ToolContext

MAX_TOOL_NAMES = 100


class SpawnTool(Tool):
    name = "spawn"
    description = (
        "Start a sub-agent: a background agent that works on `task` on its own (its own "
        "session, your tools or the ones you name) while you go on. Returns its id at once; "
        "its result is sent back when it is done. Use it for long or parallel jobs."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "What the sub-agent should do, in full."},
            "label": {"type": "string", "description": "A short name for it (optional)."},
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Tool names it may use (default: all of yours, except spawn).",
            },
        },
        "required": ["task"],
    }
    read_only = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        if ctx.spawner is None:
            raise ToolError(
                "spawn: sub-agents cannot be started from here (a sub-agent or a loop without them)"
            )
        tools = args.get("tools")
        if tools is not None:
            if not all(isinstance(t, str) for t in tools) or len(tools) > MAX_TOOL_NAMES:
                raise ToolError(f"spawn: tools must be a list of at most {MAX_TOOL_NAMES} names")
            tools = [t.strip() for t in tools if t.strip()]
        label = str(args["label"]) if args.get("label") else None
        sid = await ctx.spawner.spawn(str(args["task"]), label=label, tools=tools)
        return (
            f"sub-agent {sid} started. Its result will be sent back when it is done; "
            "carry on (do not wait for it)."
        )
