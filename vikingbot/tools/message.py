"""The ``message`` tool: send text to a person through the bus.

Target, first that applies: the call's ``target`` argument, the turn's
``metadata["reply_to"]`` (both ``channel:chat_id[:thread]``), else the chat of
the turn's own session. The outbound handler (the channel manager) validates
and delivers; the tool reports whether the message was accepted. With a
``run_id`` in the turn's metadata, the n-th message of the turn gets the dedupe
key ``"<run_id>:<n>"`` (n from 1), so a repeated run never sends it twice.
``HEARTBEAT_OK``/``HEARTBEAT_KEEP`` tokens are stripped before sending.

A turn whose metadata carries a ``deliver`` callable (the heartbeat's) sends
through it instead of the bus: ``await deliver(text, target_or_None) -> bool``.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

from vikingbot.errors import ToolError
from vikingbot.replies import strip_tokens
from vikingbot.tools.base import Tool, ToolContext

NO_CHAT_TYPES = frozenset({"heartbeat", "cron"})


class Target(NamedTuple):
    channel: str
    chat_id: str
    thread: str | None
    channel_id: str = "default"

    def __str__(self) -> str:
        return ":".join(x for x in (self.channel, self.chat_id, self.thread or "") if x)


def parse_target(text: str) -> Target:
    """``channel:chat_id[:thread]`` -> Target. Pure; ``ToolError`` when malformed."""
    parts = [p.strip() for p in str(text).strip().split(":", 2)]
    if not parts[0] or any(c.isspace() for c in parts[0]):
        raise ToolError(f"message: bad target {text!r}; expected channel:chat_id[:thread]")
    chat = parts[1] if len(parts) > 1 else ""
    thread = parts[2] if len(parts) > 2 and parts[2] else None
    return Target(parts[0], chat, thread)


def resolve_target(arg: Any, ctx: ToolContext) -> Target:
    if arg:
        return parse_target(str(arg))
    reply_to = ctx.metadata.get("reply_to")
    if reply_to:
        return parse_target(str(reply_to))
    key = ctx.session_key
    if key.type in NO_CHAT_TYPES:
        raise ToolError(
            f"message: this {key.type} turn has no chat to reply to; give a target "
            "(channel:chat_id)"
        )
    return Target(key.type, key.chat_id, None, key.channel_id)


class MessageTool(Tool):
    name = "message"
    description = (
        "Send a message to the user. By default it goes to the chat this turn belongs to; "
        "`target` (channel:chat_id[:thread]) sends it elsewhere."
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
        from vikingbot.bus.events import OutboundMessage

        text = strip_tokens(str(args["text"]))
        if not text:
            raise ToolError("message: nothing to send (empty text)")
        if ctx.deliver is not None:
            # Background turns (heartbeat, cron) route through the delivery service: the target
            # (the entry's tag or bot.heartbeat.target, or this call's own) is validated
            # there as untrusted input and refused targets fall back to the owner.
            ctx.message_attempts += 1
            status = await ctx.deliver(text, args.get("target") or None)
            if status == "failed":
                raise ToolError("message: the result could not be delivered")
            ctx.messages_sent += 1
            if status == "inboxed":
                return "message kept in the user's inbox (no channel could take it now)"
            return "message delivered"
        if ctx.bus is None:
            raise ToolError("message: no way to send messages here; answer in your reply instead")
        target = resolve_target(args.get("target"), ctx)
        ctx.message_attempts += 1
        run_id = ctx.metadata.get("run_id")
        outbound = OutboundMessage(
            channel=target.channel,
            chat_id=target.chat_id,
            text=text,
            thread=target.thread,
            channel_id=target.channel_id,
            dedupe_key=f"{run_id}:{ctx.message_attempts}" if run_id else None,
            metadata={
                "source": "message-tool",
                "session": str(ctx.session_key),
                "unattended": ctx.unattended,
                "explicit_target": bool(args.get("target")),
            },
        )
        if not await ctx.bus.send(outbound):
            raise ToolError(f"message: delivery to {target} was not accepted")
        ctx.messages_sent += 1
        return f"message sent to {target}"
