"""The memory tools: the agent recalls, remembers and forgets on purpose.

- ``recall`` (read-only): the memory files, and with a ``query`` the matching lines
  of them plus a history search over past conversations (``search``);
- ``memory`` with ``action`` ``remember`` (one line added to ``MEMORY.md`` or
  ``USER.md`` as ``- text``) or ``forget`` (the lines holding ``text`` removed,
  case-insensitive); ``action=recall`` is the same as the ``recall`` tool.

Changes go through ``memory.versions.change``: a snapshot the user sees in
``vikingbot memory log`` and can undo, under the file's lock (two chats
remembering at once both keep their line). Two names because the approval rule
goes by tool name: ``recall`` is read-only, so unattended turns may use it by
default; ``memory`` changes files, so they use it only when ``safe_tools`` names it.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from vikingbot.errors import ToolError
from vikingbot.housekeeping.search import format_hits, fresh_search
from vikingbot.memory import versions
from vikingbot.memory.consolidate import cap_text
from vikingbot.tools.base import Tool, ToolContext

MAX_TEXT = 500
MAX_FORGET = 20  # lines one forget may remove
RECALL_CHARS = 12_000


def _clean(text: str) -> str:
    """One line of memory: whitespace collapsed, control characters dropped."""
    text = "".join(ch for ch in text if ch.isprintable() or ch in " \t\n")
    return " ".join(text.split())


def add_line(text: str, line: str, cap: int) -> str:
    """``text`` with ``- line`` appended (unchanged if already there). Pure."""
    if any(_clean(old.lstrip("-*+ ")).lower() == line.lower() for old in text.splitlines()):
        return text
    new = (text.rstrip("\n") + "\n" if text.strip() else "") + f"- {line}\n"
    if len(new) > cap:
        raise versions.MemoryRefused(
            f"memory is full ({len(text)} of {cap} characters, bot.memory.max_chars): "
            "forget something first, or merge lines"
        )
    return new


def drop_lines(text: str, what: str) -> str:
    """``text`` without the lines holding ``what`` (case-insensitive). Pure."""
    lines = text.splitlines(keepends=True)
    keep = [ln for ln in lines if what.lower() not in ln.lower()]
    gone = len(lines) - len(keep)
    if gone == 0:
        raise versions.MemoryRefused(f"no line of memory holds {what!r}")
    if gone > MAX_FORGET:
        raise versions.MemoryRefused(
            f"{gone} lines hold {what!r}: be more precise (at most {MAX_FORGET} at once)"
        )
    return "".join(keep)


class MemoryTool(Tool):
    """Recall, remember and forget durable facts (memory/MEMORY.md, memory/USER.md)."""

    name: ClassVar[str] = "memory"
    description: ClassVar[str] = (
        "Change your long-term memory. action=remember: keep one short fact in "
        "memory/MEMORY.md (file USER.md for facts about the user). action=forget: remove the "
        "lines that contain the given text. action=recall: as the recall tool. Every change "
        "is versioned and the user can undo it."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["recall", "remember", "forget"]},
            "text": {"type": "string", "description": "remember: the fact; forget: text to drop"},
            "query": {"type": "string", "description": "recall: words to look for"},
            "file": {"type": "string", "enum": list(versions.FILES)},
        },
        "required": ["action"],
        "additionalProperties": False,
    }
    read_only: ClassVar[bool] = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        args = self.check_args(args)
        action = str(args["action"])
        name = str(args.get("file") or "MEMORY.md")
        if name not in versions.FILES:
            raise ToolError(f"memory: file must be one of {', '.join(versions.FILES)}")
        if action == "recall":
            return await recall(ctx, str(args.get("query") or "").strip())
        text = _clean(str(args.get("text") or ""))
        if not text:
            raise ToolError(f"memory: {action} needs text")
        if len(text) > MAX_TEXT:
            raise ToolError(f"memory: text is {len(text)} characters; at most {MAX_TEXT}")
        cap = ctx.config.bot.memory.max_chars
        if action == "remember":
            edit = {name: lambda old: add_line(old, text, cap)}
        else:
            edit = {name: lambda old: drop_lines(old, text)}
        reason = f"{action} ({ctx.session_key})"
        try:
            done = await ctx.io.run(versions.change, ctx.workspace, edit, reason)
        except versions.MemoryRefused as exc:
            raise ToolError(f"memory: {exc}") from exc
        if done is None:
            return f"memory/{name} already holds that."
        return f"memory/{name} changed ({done.stat()}); version {done.id}."


class RecallTool(Tool):
    """Read memory and search past conversations (read-only)."""

    name: ClassVar[str] = "recall"
    description: ClassVar[str] = (
        "Read your long-term memory (memory/MEMORY.md, memory/USER.md); with a query, only "
        "the matching lines, plus matching messages from past conversations."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Words to look for."}},
        "additionalProperties": False,
    }
    read_only: ClassVar[bool] = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        args = self.check_args(args)
        return await recall(ctx, str(args.get("query") or "").strip())


async def recall(ctx: ToolContext, query: str) -> str:
    """The memory files (only the lines matching ``query`` when given) and history hits."""
    parts: list[str] = []
    for n in versions.FILES:
        text = await ctx.io.run(versions.read, ctx.workspace, n)
        if query:
            words = [w.lower() for w in query.split()]
            lines = [ln for ln in text.splitlines() if any(w in ln.lower() for w in words)]
            text = "\n".join(lines)
        if text.strip():
            parts.append(f"## memory/{n}\n{cap_text(text.strip(), RECALL_CHARS)}")
    if query and ctx.store is not None:
        sessions_dir = getattr(ctx.sessions, "sessions_dir", None)
        hits = await asyncio.to_thread(fresh_search, ctx.store, sessions_dir, query, 10)
        parts.append("## past conversations\n" + format_hits(hits))
    return "\n\n".join(parts) or "Memory is empty."
