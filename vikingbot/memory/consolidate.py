"""The idle memory pass: a model decides what from the new messages is worth keeping.

When a chat session has been quiet for ``bot.memory.consolidate_after_idle`` and
holds messages newer than its ``consolidated_through`` (session metadata), its
workspace gets one model call: the current ``MEMORY.md`` and ``USER.md`` plus the
new messages of every such session in that workspace, with the instruction to
merge, prune and rewrite both files within ``bot.memory.max_chars`` each. The
answer (``parse_reply``) is applied through ``memory.versions.change``, so it is
a snapshot the user can read and undo. A workspace with nothing new costs no
model call (nothing is read but session metadata lines). Heartbeat and cron
sessions are left out (their prompts are the bot's own).

The answer's format::

    === MEMORY.md
    <the whole new file>
    === USER.md
    <the whole new file>

or ``NO_CHANGE``. A file the answer leaves out stays as it is; anything that does
not parse changes nothing (and is logged).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.errors import VikingbotError
from vikingbot.memory import versions
from vikingbot.providers.base import ChatMessage
from vikingbot.session.types import Message, SessionKey

if TYPE_CHECKING:
    from vikingbot.session.store import SessionStore

Complete = Callable[[list[ChatMessage]], Awaitable[str]]

SKIP_TYPES = frozenset({"heartbeat", "cron", "doctor"})
META_KEY = "consolidated_through"
NO_CHANGE = "NO_CHANGE"
MAX_INPUT_CHARS = 60_000  # of new messages per pass (the newest are kept)
MAX_MESSAGE_CHARS = 2_000
MEMORY_SYSTEM = (
    "You keep the long-term memory of a personal assistant: two Markdown files, MEMORY.md "
    "(durable facts, decisions, ongoing projects, things the user asked to remember) and "
    "USER.md (who the user is: name, preferences, habits, people, places). You are given both "
    "files and the conversation since your last pass. Decide what is worth keeping for weeks; "
    "merge it into the files, rewrite or drop what is outdated or repeated, and keep each file "
    "under {cap} characters. Never copy chit-chat. Answer with {none} if nothing should change; "
    "otherwise with each file you change in full, each after a line '=== MEMORY.md' or "
    "'=== USER.md', and nothing else."
)
_HEAD = re.compile(r"^=== (MEMORY\.md|USER\.md)\s*$", re.MULTILINE)


@dataclass
class ConsolidateStats:
    sessions_seen: int = 0
    workspaces: int = 0
    model_calls: int = 0
    consolidated: list[str] = field(default_factory=list)  # session keys
    versions: list[str] = field(default_factory=list)  # snapshot ids written
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions_seen": self.sessions_seen,
            "workspaces": self.workspaces,
            "model_calls": self.model_calls,
            "consolidated": list(self.consolidated),
            "versions": list(self.versions),
            "errors": list(self.errors),
        }


def is_new(m: Message, through: datetime | None) -> bool:
    """A message the pass reads: the user's or the assistant's words, not bookkeeping."""
    if m.role not in ("user", "assistant") or not m.content.strip():
        return False
    if m.metadata.get("heartbeat") or m.metadata.get("bookkeeping"):
        return False
    return through is None or m.timestamp > through


def pass_messages(files: dict[str, str], new: list[Message], cap: int) -> list[ChatMessage]:
    """The request for one workspace's pass. Pure."""
    lines: list[str] = []
    for m in new:
        text = " ".join(m.content.split())
        if len(text) > MAX_MESSAGE_CHARS:
            text = text[:MAX_MESSAGE_CHARS] + "…"
        lines.append(f"[{m.timestamp:%Y-%m-%d %H:%M}] {m.role}: {text}")
    talk = "\n".join(lines)
    if len(talk) > MAX_INPUT_CHARS:
        talk = "…\n" + talk[-MAX_INPUT_CHARS:]
    body = [f"=== {name}\n{files.get(name, '').strip()}" for name in versions.FILES]
    body.append(f"--- conversation since the last pass ---\n{talk}")
    return [
        ChatMessage("system", MEMORY_SYSTEM.format(cap=cap, none=NO_CHANGE)),
        ChatMessage("user", "\n\n".join(body)),
    ]


def parse_reply(text: str, cap: int) -> dict[str, str]:
    """The files the answer rewrites (name -> text, each capped at ``cap`` on a line
    boundary); ``{}`` for ``NO_CHANGE`` or an answer without any file. Total, linear."""
    if text.strip().upper().startswith(NO_CHANGE):
        return {}
    heads = list(_HEAD.finditer(text))
    out: dict[str, str] = {}
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[h.end() : end].strip("\n").strip()
        out[h.group(1)] = cap_text(body, cap) + "\n" if body else ""
    return out


def cap_text(text: str, cap: int) -> str:
    """``text`` cut to at most ``cap`` characters at a line boundary."""
    if len(text) <= cap:
        return text
    cut = text.rfind("\n", 0, cap)
    return text[: cut if cut > 0 else cap].rstrip()


def _through(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


@dataclass
class _Pending:
    keys: list[SessionKey] = field(default_factory=list)
    newest: dict[SessionKey, datetime] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)


async def consolidate_idle(
    sessions: SessionStore,
    workspace_for: Callable[[SessionKey], Path],
    complete: Complete | None,
    *,
    now: datetime,
    idle_after: timedelta,
    cap: int,
    run: Callable[..., Awaitable[Any]],
) -> ConsolidateStats:
    """One pass over every idle session with new messages, one model call per workspace.

    ``run(fn, *args)`` runs blocking file work off the event loop.
    """
    stats = ConsolidateStats()
    pending: dict[Path, _Pending] = {}
    for meta in await run(sessions.list_sessions):
        if meta.key.type in SKIP_TYPES or now - meta.updated_at < idle_after:
            continue
        through = _through(meta.metadata.get(META_KEY))
        if through is not None and meta.updated_at <= through:
            continue  # nothing since the last pass: not even read
        stats.sessions_seen += 1
        try:
            all_messages = await run(sessions.read_messages, meta.key)
            new = [m for m in all_messages if is_new(m, through)]
            workspace = Path(workspace_for(meta.key))
        except (OSError, VikingbotError) as exc:
            stats.errors.append(f"{meta.key}: {exc}")
            continue
        p = pending.setdefault(workspace, _Pending())
        p.keys.append(meta.key)
        p.newest[meta.key] = max([meta.updated_at, *(m.timestamp for m in new)])
        p.messages.extend(new)
    for workspace, p in pending.items():
        await _one_workspace(sessions, workspace, p, complete, stats, now=now, cap=cap, run=run)
    return stats


async def _one_workspace(
    sessions: SessionStore,
    workspace: Path,
    p: _Pending,
    complete: Complete | None,
    stats: ConsolidateStats,
    *,
    now: datetime,
    cap: int,
    run: Callable[..., Awaitable[Any]],
) -> None:
    log = logger.bind(workspace=str(workspace))
    if p.messages:
        if complete is None:
            stats.errors.append(f"{workspace}: no model configured for the memory pass")
            return
        p.messages.sort(key=lambda m: m.timestamp)
        files = {n: await run(versions.read, workspace, n) for n in versions.FILES}
        stats.workspaces += 1
        stats.model_calls += 1
        try:
            answer = await complete(pass_messages(files, p.messages, cap))
        except VikingbotError as exc:
            log.warning("memory pass for {} failed: {}; tried again next time", workspace, exc)
            stats.errors.append(f"{workspace}: {exc}")
            return
        rewrite = parse_reply(answer, cap)
        edits = {name: (lambda _old, new=text: new) for name, text in rewrite.items()}
        reason = f"consolidation of {len(p.messages)} new message(s)"
        try:
            version = await run(versions.change, workspace, edits, reason, now=now)
        except (OSError, VikingbotError) as exc:
            stats.errors.append(f"{workspace}: {exc}")
            return
        if version is not None:
            stats.versions.append(version.id)
            log.info("memory pass: {} ({})", version.id, version.stat())
    for key in p.keys:
        try:
            await run(sessions.update_metadata, key, **{META_KEY: p.newest[key].isoformat()})
            stats.consolidated.append(str(key))
        except (OSError, VikingbotError) as exc:
            stats.errors.append(f"{key}: {exc}")
