"""Compaction: a long chat's oldest turns folded into a summary, so a turn never fails for length.

A session file keeps every message. A *summary entry* is one more line in it: a
``system`` message whose metadata is ``{"compaction": {"kept": K, "folded": N}}``.
It stands for everything before it except the last ``K`` messages (which stay
verbatim), and it already includes the summary entry before it (summaries are
folded forward, so only the newest one is ever read). Older messages stay on
disk and in history search; only the request gets smaller.

What a request carries (``split``): the newest summary (in the system prompt),
then the messages after the summary's fold point. Before each model call the
loop measures the request in characters against the *budget*,
``bot.agents.context_window`` x ``bot.agents.compact_at`` x ``CHARS_PER_TOKEN``,
and against ``bot.agents.history_window`` messages:

1. over budget: tool results in turns before the current one are cut to a short
   stub (``cut_tool_results``) - the cheapest saving, no model call;
2. still over (or too many messages): the oldest turns are folded (``plan_fold``
   picks the cut at a user message so what stays fits ``compact_keep`` of the
   budget) and a model call (``summary_messages``) writes the new summary.

The provider's "too long" answer does the same with all of history folded and
the turn's own older tool results cut (``force``). Everything in this module is pure; the loop does I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vikingbot.providers.base import ChatMessage
from vikingbot.session.types import Message

KEY = "compaction"  # the metadata key of a summary entry
CHARS_PER_TOKEN = 4  # the estimate used everywhere a request is measured
TOOL_STUB_CHARS = 200  # how much of an old tool result stays in the request
MAX_LINE_CHARS = 4_000  # one message as the summariser sees it
SUMMARY_HEADING = "## Conversation so far (summary of earlier turns)"
SUMMARY_SYSTEM = (
    "You condense a conversation between a user and their assistant into a summary that "
    "replaces the earlier turns. Keep every fact, name, number, date, identifier, decision, "
    "preference and open task; keep quoted codes and markers exactly as written; drop "
    "pleasantries and tool output that no longer matters. Merge the previous summary (if any) "
    "with the new turns. Write plain Markdown bullet points, at most {limit} characters, "
    "and nothing else."
)


@dataclass(frozen=True)
class Split:
    """A session's history as a request sees it: the newest summary and what follows it."""

    summary: str | None
    recent: list[Message]


def is_summary(m: Message) -> bool:
    return m.role == "system" and isinstance(m.metadata.get(KEY), dict)


def split(messages: list[Message]) -> Split:
    """The newest summary entry and the messages it does not cover (oldest first)."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if is_summary(messages[i])), None)
    if last is None:
        return Split(None, [m for m in messages if not is_summary(m)])
    entry = messages[last]
    kept = _count(entry.metadata[KEY].get("kept"))
    before = [m for m in messages[:last] if not is_summary(m)]
    after = [m for m in messages[last + 1 :] if not is_summary(m)]
    return Split(entry.content, (before[-kept:] if kept else []) + after)


def split_back(newest_first: Iterable[Message]) -> Split:
    """``split`` of a history given newest first, read only as far as the newest summary
    entry and the messages it keeps."""
    after: list[Message] = []
    it = iter(newest_first)
    for m in it:
        if not is_summary(m):
            after.append(m)
            continue
        kept = _count(m.metadata[KEY].get("kept"))
        before: list[Message] = []
        if kept:
            for old in it:
                if not is_summary(old):
                    before.append(old)
                    if len(before) == kept:
                        break
        return Split(m.content, before[::-1] + after[::-1])
    return Split(None, after[::-1])


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def message_chars(m: Message | ChatMessage) -> int:
    """A message's size as the request measures it (text plus tool-call arguments)."""
    calls = m.tool_calls or []
    extra = sum(len(json.dumps(_call_obj(c), ensure_ascii=False)) for c in calls)
    return len(m.content) + extra


def _call_obj(c: Any) -> Any:
    if isinstance(c, dict):
        return c
    return {"id": c.id, "name": c.name, "arguments": c.arguments}


def budget_chars(context_window: int, share: float) -> int:
    """The request budget in characters: ``share`` of the model window."""
    return int(context_window * share * CHARS_PER_TOKEN)


def last_user(messages: list[Message]) -> int:
    """Index of the last user message (the start of the newest turn), else ``len``."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return len(messages)


def cut_tool_results(messages: list[Message], before: int) -> list[Message]:
    """``messages`` with each tool result before index ``before`` cut to a stub."""
    out: list[Message] = []
    for i, m in enumerate(messages):
        if i < before and m.role == "tool" and len(m.content) > TOOL_STUB_CHARS + 80:
            cut = len(m.content) - TOOL_STUB_CHARS
            text = m.content[:TOOL_STUB_CHARS] + f"\n[... {cut} characters of tool output cut]"
            m = Message(
                m.role, text, m.timestamp, m.tool_calls, m.tool_call_id, m.name, m.usage, m.metadata
            )
        out.append(m)
    return out


def plan_fold(
    recent: list[Message], *, fixed: int, budget: int, keep: int, max_messages: int
) -> int:
    """How many of the oldest ``recent`` messages to fold (0: none needed or none possible).

    ``fixed`` is what the request holds besides ``recent`` (system prompt, summary,
    tools, the new prompt). Nothing is folded while the request fits the budget and
    the message cap. Otherwise the cut is the earliest user message after which at
    most ``keep`` characters and ``max_messages // 2`` messages remain; when even
    the newest turn is larger, everything before it is folded.
    """
    total = sum(message_chars(m) for m in recent)
    if fixed + total <= budget and len(recent) <= max_messages:
        return 0
    max_keep = max(1, max_messages // 2)
    tail = 0
    best = None
    for i in range(len(recent) - 1, -1, -1):
        tail += message_chars(recent[i])
        if tail > keep or len(recent) - i > max_keep:
            break
        if recent[i].role == "user":
            best = i
    if best is None:
        best = last_user(recent)
        if best >= len(recent):
            best = len(recent)  # no user message at all: everything folds
    return best


def transcript(messages: list[Message]) -> str:
    """The folded turns as the summariser reads them (tool results already cut)."""
    lines: list[str] = []
    for m in messages:
        text = m.content.strip()
        if m.role == "tool":
            text = text[:TOOL_STUB_CHARS] + ("…" if len(text) > TOOL_STUB_CHARS else "")
            lines.append(f"[tool {m.name or ''} result] {text}")
            continue
        if len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS] + "…"
        calls = ", ".join(str(_call_obj(c).get("name", "")) for c in m.tool_calls or [])
        if calls:
            text = f"{text} (called {calls})".strip()
        if text:
            lines.append(f"[{m.role}] {text}")
    return "\n".join(lines)


def summary_messages(previous: str | None, folded: list[Message], limit: int) -> list[ChatMessage]:
    """The request that asks a model for the new summary."""
    parts = []
    if previous:
        parts.append(f"Previous summary:\n{previous}")
    parts.append(f"New turns to merge in:\n{transcript(folded)}")
    return [
        ChatMessage("system", SUMMARY_SYSTEM.format(limit=limit)),
        ChatMessage("user", "\n\n".join(parts)),
    ]


_BLANKS = re.compile(r"\n{3,}")


def clean_summary(text: str, limit: int) -> str:
    """The model's summary, trimmed and capped at ``limit`` characters."""
    text = _BLANKS.sub("\n\n", text.strip())
    if len(text) > limit:
        text = text[:limit].rstrip() + "\n[... summary cut at its size cap]"
    return text


def summary_entry(text: str, *, kept: int, folded: int, when: datetime, model: str) -> Message:
    """The session line that stores a summary (see the module docstring)."""
    return Message(
        "system",
        text,
        when,
        metadata={KEY: {"kept": kept, "folded": folded, "model": model}, "bookkeeping": True},
    )


def with_summary(system: str, summary: str | None) -> str:
    """The system prompt with the summary section appended (when there is one)."""
    return f"{system}\n\n{SUMMARY_HEADING}\n\n{summary}" if summary else system
