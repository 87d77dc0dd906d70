"""The ``message`` tool: send text to a person, through the turn's deliverer.

Every turn that may send gets a ``deliver`` part from its producer (heartbeat,
cron, dashboard prompt, chat; see ``vikingbot.delivery.adapter``), and the tool
sends through it and nothing else: the delivery service resolves the target as
untrusted input (allow-list, owner fallback, audit, outbox, inbox). Without a
target the message goes where the turn's producer says: the chat the turn belongs
to, or the background turn's default target. ``HEARTBEAT_OK``/``HEARTBEAT_KEEP``
tokens are stripped before sending. A turn without a deliverer cannot send.
"""

from __future__ import annotations

from typing import Any, ClassVar

from vikingbot.errors import ToolError
from vikingbot.replies import strip_tokens
from vikingbot.tools.base import Tool, ToolContext


class MessageTool(Tool):
    name = "message"
    description = (
        "Send a message to the user. By default it goes to the chat this turn belongs to "
        "(or, in a background task, to the task's configured target); `target` "
        "(channel:chat_id[:thread], owner, last, dashboard) sends it elsewhere if allowed."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The message (Markdown allowed)."},
            "target": {"type": "string", "description": "Optional channel:chat_id[:thread]."},
        },
        "required": ["text"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        text = strip_tokens(str(args["text"]))
        if not text:
            raise ToolError("message: nothing to send (empty text)")
        target = str(args["target"]).strip() or None if args.get("target") else None
        if ctx.deliver is None:
            raise ToolError("message: no way to send messages here; answer in your reply instead")
        ctx.message_attempts += 1
        status = await ctx.deliver(text, target)
        if status == "failed":
            raise ToolError("message: the message could not be delivered")
        ctx.messages_sent += 1
        if status == "inboxed":
            return "message kept in the user's inbox (no channel could take it now)"
        return "message delivered"
