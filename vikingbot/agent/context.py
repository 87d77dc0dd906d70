"""What the model sees: the system prompt from the workspace, and the history window.

The system prompt is a short preamble (who and where the agent is, the time,
whether anyone is present), then each workspace file that exists, in order:
``SOUL.md``, ``USER.md``, ``AGENTS.md``, ``TOOLS.md``, ``memory/MEMORY.md``,
``memory/USER.md`` (each capped at ``MAX_FILE_CHARS``), then the skills' names and descriptions. History comes from the session: the last
``bot.agents.history_window`` messages, repaired so a provider accepts them
(it starts at a user message; every tool call has a result; no orphan results).
Everything here is pure except ``read_context_files``.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from vikingbot.agent.offered import can_write_files, tools_note, workspace_line
from vikingbot.agentio import open_regular
from vikingbot.errors import ToolError
from vikingbot.providers.base import ChatMessage, ToolCall
from vikingbot.session.types import Message, SessionKey
from vikingbot.tools.base import is_unattended

CONTEXT_FILES = (
    "SOUL.md",
    "USER.md",
    "AGENTS.md",
    "TOOLS.md",
    "memory/MEMORY.md",
    "memory/USER.md",
)
MAX_FILE_CHARS = 32_000
MISSING_RESULT = "(no result was recorded for this tool call)"


def read_context_files(workspace: Path) -> list[tuple[str, str]]:
    """(name, text) of each context file that exists and is readable, in order."""
    found: list[tuple[str, str]] = []
    for name in CONTEXT_FILES:
        path = workspace / name
        try:  # the agent can write these: a pipe is skipped, a huge file read only in part
            fd = open_regular(path, name)
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(MAX_FILE_CHARS * 4 + 4)
        except (OSError, ToolError):
            continue
        text = data.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        if len(text) > MAX_FILE_CHARS:
            text = text[:MAX_FILE_CHARS] + f"\n[... {name} truncated; read the rest with read_file]"
        found.append((name, text))
    return found


def system_prompt(
    workspace: Path,
    files: list[tuple[str, str]],
    *,
    now: datetime,
    timezone: str | None,
    session_key: SessionKey,
    metadata: dict[str, Any],
    skills: str | None = None,
    light: bool = False,
    offered: Collection[str] | None = None,
    known: Collection[str] = (),
) -> str:
    """The preamble, then each context file, then ``skills`` (the listing of
    ``skills.prompt.listing``) when there is one. ``light`` (a heartbeat turn with
    ``bot.heartbeat.context: light``): the preamble alone, no word of the files.
    ``offered`` (the tools the turn is offered, of the ``known`` ones; None: all): no
    word of the others, in the preamble or in TOOLS.md (offered.py)."""
    tz = ZoneInfo(timezone) if timezone else None
    local = now.astimezone(tz) if tz else now
    lines = [
        "You are vikingbot, a personal AI agent. You act for your user through tools.",
        (
            f"Your workspace is {workspace}; file tools and commands work inside it."
            if offered is None
            else workspace_line(str(workspace), offered)
        ),
        f"Current time: {local:%Y-%m-%d %H:%M %Z} ({local:%A}).",
    ]
    if is_unattended(metadata):
        lines.append(
            "Nobody is watching this turn (it was started by a schedule): only the tools "
            "allowed for unattended turns will run. Use the `message` tool to tell the user "
            "anything they should see."
        )
    else:
        lines.append(f"You are talking with the user in {session_key.type} chat {session_key}.")
    if light:
        return "\n".join(lines)
    lines.append(
        "The files below say who you are (SOUL.md), who your user is (USER.md), how to work "
        "(AGENTS.md), notes on tools (TOOLS.md) and what you remember (memory/MEMORY.md, "
        "memory/USER.md)."
    )
    if offered is None or "memory" in offered:  # versioned, undoable (docs/memory.md)
        lines[-1] += " Keep what should last with the memory tool (remember/forget)."
    elif can_write_files(offered):
        lines[-1] += " Update them with the file tools when you learn something that should last."
    if offered is None or "recall" in offered:
        lines[-1] += " The recall tool searches memory and past conversations."
    parts = ["\n".join(lines)]
    for name, text in files:
        if name == "TOOLS.md" and offered is not None:
            text = tools_note(text, known, offered)
        parts.append(f"## {name}\n\n{text}")
    if skills:
        parts.append(skills)
    return "\n\n".join(parts)


def _calls(raw: list[dict[str, Any]] | None) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for i, c in enumerate(raw or []):
        args = c.get("arguments")
        calls.append(
            ToolCall(
                str(c.get("id") or f"call_{i}"),
                str(c.get("name", "")),
                args if isinstance(args, dict) else {},
            )
        )
    return calls


EARLIER_NOTE = "(Earlier, before the user wrote here, vikingbot sent them the following.)"


def history_messages(history: list[Message]) -> list[ChatMessage]:
    """Session messages -> chat messages a provider accepts. Pure.

    Drops system messages, drops tool results whose call is not in the window,
    and adds a placeholder result for a call whose result is missing. Before the
    first user message only plain assistant messages are kept (a heartbeat or
    cron result delivered into this chat before the user wrote, or the end of
    a cut-off turn), introduced by ``EARLIER_NOTE`` so the conversation still
    starts with a user message.
    """
    out: list[ChatMessage] = []
    started = False
    pending: list[ToolCall] = []
    for m in history:
        if m.role == "user":
            break
        if m.role == "assistant" and not m.tool_calls and m.content.strip():
            if not out:
                out.append(ChatMessage("user", EARLIER_NOTE))
            out.append(ChatMessage("assistant", m.content))

    def flush() -> None:
        for c in pending:
            out.append(ChatMessage("tool", MISSING_RESULT, tool_call_id=c.id, name=c.name))
        pending.clear()

    for m in history:
        if m.role == "user":
            started = True
        if not started or m.role == "system":
            continue
        if m.role == "tool":
            match = next((c for c in pending if c.id == m.tool_call_id), None)
            if match is None:
                continue
            pending.remove(match)
            out.append(ChatMessage("tool", m.content, tool_call_id=match.id, name=match.name))
            continue
        flush()
        if m.role == "assistant":
            calls = _calls(m.tool_calls)
            out.append(ChatMessage("assistant", m.content, tool_calls=calls))
            pending.extend(calls)
        elif m.role == "user":
            out.append(ChatMessage("user", m.content))
    flush()
    return out


def to_session(
    msg: ChatMessage,
    when: datetime,
    *,
    usage: dict[str, int] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Message:
    """A chat message of this turn -> the session's ``Message`` record."""
    return Message(
        role=msg.role,
        content=msg.content,
        timestamp=when,
        tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in msg.tool_calls]
        or None,
        tool_call_id=msg.tool_call_id,
        name=msg.name,
        usage=usage,
        metadata=dict(metadata or {}),
    )
