"""Bring history over from an OpenViking vikingbot installation.

OpenViking's vikingbot keeps sessions as JSONL too: a metadata line first
(``_type: "metadata"``, ``session_key``, ``created_at``, ``updated_at``,
``metadata``), then one message per line. This module reads such a folder and
copies each session into a :class:`SessionStore`. The source is only ever
opened for reading. A session whose key already exists in the store is left
alone, so running the import twice changes nothing. A file that cannot be read
is skipped and reported with its reason; the other files still import.

Key forms accepted in ``session_key`` (or, when it is missing, the file name):
``type__channel_id__chat_id`` (OpenViking), ``type:channel_id:chat_id``,
``type:chat_id`` and ``type_chat_id`` (older nanobot-style names); the two-part
forms use channel ``default``. Times without an offset were written in the
machine's local time and are converted to UTC.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from loguru import logger

from vikingbot.errors import SessionError
from vikingbot.session import codec
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message, SessionKey, SessionMeta

Status = Literal["imported", "exists", "failed"]
_KNOWN = {"role", "content", "timestamp", "tool_calls", "tool_call_id", "name", "metadata"}
_USAGE_IN = ("input", "input_tokens", "prompt_tokens")
_USAGE_OUT = ("output", "output_tokens", "completion_tokens")


@dataclass
class ImportOutcome:
    source: str
    status: Status
    key: str | None = None
    messages: int = 0
    reason: str | None = None


@dataclass
class ImportReport:
    source: str
    outcomes: list[ImportOutcome] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "imported": self.count("imported"),
            "exists": self.count("exists"),
            "failed": self.count("failed"),
            "sessions": [asdict(o) for o in self.outcomes],
        }


def parse_key(text: str, *, from_filename: bool = False) -> SessionKey:
    """An OpenViking session key (see the module docstring for the forms)."""
    if "__" in text:
        parts = text.split("__", 2)
        if len(parts) == 3:
            return SessionKey(parts[0], parts[1], parts[2])
        return SessionKey(parts[0], "default", parts[1])
    if ":" in text:
        return SessionKey.parse(text)
    if from_filename and "_" in text:
        kind, chat = text.split("_", 1)
        return SessionKey(kind, "default", chat)
    raise SessionError(f"cannot tell channel and chat apart in session key {text!r}")


def _time(value: Any, where: str, field_name: str) -> datetime:
    if not isinstance(value, str):
        raise SessionError(f"{where}: {field_name} must be an ISO-8601 time, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise SessionError(f"{where}: {field_name} is not an ISO-8601 time: {value!r}") from exc
    # a naive time is local time on the machine that wrote it
    return parsed.astimezone(UTC)


def _content(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # multimodal parts
        texts: list[str] = []
        for part in value:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict):
                texts.append(f"[{part.get('type', 'attachment')}]")
            else:
                texts.append(str(part))
        return "\n".join(texts)
    return json.dumps(value, ensure_ascii=False)


def _usage(value: Any) -> dict[str, int] | None:
    if not isinstance(value, dict):
        return None
    out: dict[str, int] = {}
    for target, names in (("input", _USAGE_IN), ("output", _USAGE_OUT)):
        for name in names:
            if isinstance(value.get(name), int):
                out[target] = value[name]
                break
    return out or None


def _message(obj: dict[str, Any], where: str, fallback: datetime) -> Message:
    role = obj.get("role")
    if not isinstance(role, str) or not role:
        raise SessionError(f"{where}: message has no role")
    ts = obj.get("timestamp")
    metadata = obj.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    extra = {k: v for k, v in obj.items() if k not in _KNOWN and k not in ("usage", "token_usage")}
    if extra:
        metadata["openviking"] = extra
    tool_calls = obj.get("tool_calls")
    return Message(
        role=role,
        content=_content(obj.get("content")),
        timestamp=fallback if ts is None else _time(ts, where, "timestamp"),
        tool_calls=tool_calls if isinstance(tool_calls, list) else None,
        tool_call_id=obj.get("tool_call_id") if isinstance(obj.get("tool_call_id"), str) else None,
        name=obj.get("name") if isinstance(obj.get("name"), str) else None,
        usage=_usage(obj.get("usage", obj.get("token_usage"))),
        metadata=metadata,
    )


def read_file(path: Path, now: datetime) -> tuple[SessionMeta, list[Message]]:
    """Parse one OpenViking session file (read-only). Raises :class:`SessionError`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SessionError(f"cannot read {path}: {exc}") from exc
    head: dict[str, Any] | None = None
    messages: list[Message] = []
    for n, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        where = f"{path}:{n}"
        obj = codec.loads_line(raw, where)
        if head is None:
            if obj.get("_type") != "metadata":
                raise SessionError(f"{where}: the first line is not a metadata line")
            head = obj
            continue
        if obj.get("_type") == "metadata":
            raise SessionError(f"{where}: a second metadata line")
        fallback = messages[-1].timestamp if messages else now
        messages.append(_message(obj, where, fallback))
    if head is None:
        raise SessionError(f"{path}: empty file")
    where = f"{path}:1"
    key_text = head.get("session_key")
    try:
        if isinstance(key_text, str) and key_text:
            key = parse_key(key_text)
        else:
            key = parse_key(path.stem, from_filename=True)
    except SessionError as exc:
        raise SessionError(f"{where}: {exc}") from exc
    first = messages[0].timestamp if messages else now
    created = _time(head["created_at"], where, "created_at") if head.get("created_at") else first
    last = messages[-1].timestamp if messages else created
    updated = _time(head["updated_at"], where, "updated_at") if head.get("updated_at") else last
    metadata = head.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    user_times = [m.timestamp for m in messages if codec.counts_as_user(m)]
    metadata["imported_from"] = {
        "kind": "openviking",
        "path": str(path),
        "sha256": hashlib.sha256(data).hexdigest(),
        "imported_at": codec.dump_dt(now),
    }
    meta = SessionMeta(key, created, updated, max(user_times, default=None), metadata)
    return meta, messages


def source_files(source: Path) -> list[Path]:
    """The ``*.jsonl`` files to import: a file, a sessions folder, or a data folder."""
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise SessionError(f"no such file or folder: {source}")
    files = sorted(p for p in source.glob("*.jsonl") if p.is_file())
    if not files and (source / "sessions").is_dir():
        files = sorted(p for p in (source / "sessions").glob("*.jsonl") if p.is_file())
    return files


def import_openviking(source: Path, store: SessionStore) -> ImportReport:
    """Copy every OpenViking session under ``source`` into ``store``."""
    report = ImportReport(source=str(source))
    now = store.clock.now()
    for path in source_files(source):
        try:
            meta, messages = read_file(path, now)
        except SessionError as exc:
            logger.warning("openviking import: skipping {}: {}", path, exc)
            report.outcomes.append(ImportOutcome(str(path), "failed", reason=str(exc)))
            continue
        key = str(meta.key)
        try:
            created = store.create_from(meta, messages)
        except SessionError as exc:
            report.outcomes.append(ImportOutcome(str(path), "failed", key, reason=str(exc)))
            continue
        if created:
            logger.info("openviking import: {} -> {} ({} messages)", path, key, len(messages))
            report.outcomes.append(ImportOutcome(str(path), "imported", key, len(messages)))
        else:
            reason = "a session with this key is already in the store"
            report.outcomes.append(ImportOutcome(str(path), "exists", key, len(messages), reason))
    return report
