"""Memory consolidation: an idle session's new history, summarised into ``memory/MEMORY.md``.

Without a model call: when a session has been idle for
``bot.memory.consolidate_after_idle`` and has user messages not consolidated
yet, a dated section listing the first line of the last few of them is appended
to its workspace's ``memory/MEMORY.md``. Heartbeat and cron sessions are left
out (their prompts are the bot's own).

Once per idle period: the session's metadata records ``consolidated_through``
(the newest message consolidated) and the section carries a marker naming the
session and that time, so a crash between the two never writes a section twice.

The file is only ever appended to: its bytes are kept exactly (even if not
UTF-8), the new file is written atomically, and if the file changed while the
section was being written the write is redone on the new content.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.errors import SessionError, VikingbotError
from vikingbot.fsutil import atomic_write_bytes
from vikingbot.session.types import Message, SessionKey

if TYPE_CHECKING:
    from vikingbot.session.store import SessionStore

SKIP_TYPES = frozenset({"heartbeat", "cron"})
META_KEY = "consolidated_through"
MAX_ITEMS = 10
MAX_LINE_CHARS = 200
_ATTEMPTS = 5


@dataclass
class ConsolidateStats:
    sessions_seen: int = 0
    consolidated: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions_seen": self.sessions_seen,
            "consolidated": list(self.consolidated),
            "errors": list(self.errors),
        }


def _is_user(m: Message) -> bool:
    return m.role == "user" and not (m.metadata.get("heartbeat") or m.metadata.get("bookkeeping"))


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            line = " ".join(line.split())
            return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"
    return ""


def marker(key: SessionKey, through: datetime) -> str:
    return f"<!-- vikingbot:consolidated session={key} through={through.isoformat()} -->"


def summary_section(key: SessionKey, new: list[Message], now: datetime) -> str:
    """The Markdown section for one session's new user messages (oldest first)."""
    through = new[-1].timestamp
    shown = new[-MAX_ITEMS:]
    lines = [
        f"## {now:%Y-%m-%d} · {key}",
        "",
        marker(key, through),
        f"{len(new)} message(s) from the user between {new[0].timestamp:%Y-%m-%d %H:%M} "
        f"and {through:%Y-%m-%d %H:%M} UTC"
        + (f"; the last {len(shown)}:" if len(shown) < len(new) else ":"),
        "",
    ]
    lines += [f"- {m.timestamp:%Y-%m-%d %H:%M} {_first_line(m.content)}" for m in shown]
    return "\n".join(lines) + "\n"


def append_section(path: Path, section: str, mark: str) -> bool:
    """Append ``section`` to ``path`` atomically, keeping every existing byte.

    Returns ``False`` when ``mark`` is already in the file (written before).
    """
    target = path.resolve() if path.is_symlink() else path
    for _ in range(_ATTEMPTS):
        try:
            old = target.read_bytes()
        except FileNotFoundError:
            old = b""
        if mark.encode("utf-8") in old:
            return False
        sep = b"" if not old else (b"\n" if old.endswith(b"\n") else b"\n\n")
        new = old + sep + section.encode("utf-8")
        try:
            current = target.read_bytes()
        except FileNotFoundError:
            current = b""
        if current != old:
            continue  # the user (or the agent) wrote meanwhile: start again from theirs
        atomic_write_bytes(target, new)
        return True
    raise VikingbotError(f"{path} kept changing while a memory section was appended; try later")


def _through(meta_value: Any) -> datetime | None:
    if not isinstance(meta_value, str):
        return None
    try:
        parsed = datetime.fromisoformat(meta_value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def consolidate_idle(
    sessions: SessionStore, workspaces: Any, now: datetime, idle_after: timedelta
) -> ConsolidateStats:
    """Consolidate every session idle for ``idle_after`` with unconsolidated user messages."""
    stats = ConsolidateStats()
    for meta in sessions.list_sessions():
        if meta.key.type in SKIP_TYPES or now - meta.updated_at < idle_after:
            continue
        through = _through(meta.metadata.get(META_KEY))
        if meta.last_user_at is None or (through is not None and meta.last_user_at <= through):
            continue  # nothing from the user since the last section: not even read
        stats.sessions_seen += 1
        try:
            if consolidate_session(sessions, workspaces, meta.key, now):
                stats.consolidated.append(str(meta.key))
        except (OSError, VikingbotError) as exc:
            logger.warning("consolidate: {} skipped this time: {}", meta.key, exc)
            stats.errors.append(f"{meta.key}: {exc}")
    return stats


def consolidate_session(
    sessions: SessionStore, workspaces: Any, key: SessionKey, now: datetime
) -> bool:
    """Append one session's new user messages to its workspace memory; ``True`` if written."""
    meta = sessions.get_meta(key)
    if meta is None:
        raise SessionError(f"unknown session {key}")
    through = _through(meta.metadata.get(META_KEY))
    new = [
        m
        for m in sessions.read_messages(key)
        if _is_user(m) and _first_line(m.content) and (through is None or m.timestamp > through)
    ]
    if not new:
        return False
    new.sort(key=lambda m: m.timestamp)
    workspace = Path(workspaces.workspace_for(key))
    path = workspace / "memory" / "MEMORY.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    written = append_section(path, summary_section(key, new, now), marker(key, new[-1].timestamp))
    sessions.update_metadata(key, **{META_KEY: new[-1].timestamp.isoformat()})
    logger.bind(session=str(key), workspace=str(workspace)).info(
        "consolidate: {} message(s) of {} {} {}",
        len(new),
        key,
        "added to" if written else "were already in",
        path,
    )
    return written
