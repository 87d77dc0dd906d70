"""The session file format, as pure functions: file names, datetimes and JSON lines.

A session file is JSONL. Line 1 is the metadata line::

    {"_type": "metadata", "key": "telegram:default:42", "created_at": "...",
     "updated_at": "...", "last_user_at": null, "metadata": {"skip_heartbeat": false}}

Every further line is one message (``role``, ``content``, ``timestamp`` and the
optional ``tool_calls``, ``tool_call_id``, ``name``, ``usage``, ``metadata``).
Datetimes are ISO-8601 in UTC.

File names come from the key: each of ``type``, ``channel_id`` and ``chat_id`` is
percent-escaped (anything outside ``[A-Za-z0-9._-]`` becomes ``%xx`` per UTF-8
byte, lower-case hex) and the three are joined with ``+``. A key holding an
upper-case letter, or one whose name would pass 160 characters, gets a ``~``
and a hash of the full key appended, so keys that differ only in case stay apart
on case-insensitive file systems and long keys stay within file-name limits.
Names without ``~`` decode back to their key; the metadata line always holds the
real key either way.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

from vikingbot.errors import SessionError
from vikingbot.session.types import Message, SessionKey, SessionMeta

SUFFIX = ".jsonl"
MAX_STEM = 160
_KEEP_STEM = 140
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_UPPER = re.compile(r"[A-Z]")
_ESCAPE = re.compile(r"%([0-9a-fA-F]{2})")
_MESSAGE_OPTIONAL = ("tool_calls", "tool_call_id", "name", "usage")


def as_key(key: SessionKey | str) -> SessionKey:
    """Accept a ``SessionKey`` or its ``type:channel_id:chat_id`` text."""
    return key if isinstance(key, SessionKey) else SessionKey.parse(key)


def _escape(text: str) -> str:
    out: list[str] = []
    for byte in text.encode("utf-8", "surrogatepass"):
        out.append(chr(byte) if byte in _SAFE else f"%{byte:02x}")
    return "".join(out)


def _unescape(text: str) -> str:
    raw = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(text):
        raw += text[pos : m.start()].encode("ascii")
        raw.append(int(m.group(1), 16))
        pos = m.end()
    raw += text[pos:].encode("ascii")
    return raw.decode("utf-8", "surrogatepass")


def key_hash(key: SessionKey) -> str:
    return hashlib.sha256(str(key).encode("utf-8", "surrogatepass")).hexdigest()[:12]


def key_to_filename(key: SessionKey) -> str:
    """The session's file name (with ``.jsonl``); safe on Linux, macOS and Windows."""
    stem = "+".join(_escape(part) for part in (key.type, key.channel_id, key.chat_id))
    if stem.startswith("."):
        stem = "%2e" + stem[1:]
    if len(stem) > MAX_STEM or _UPPER.search(str(key)):
        if len(stem) > _KEEP_STEM:
            stem = re.sub(r"%[0-9a-f]?$", "", stem[:_KEEP_STEM])  # no half escapes
        stem = f"{stem}~{key_hash(key)}"
    return stem + SUFFIX


def filename_to_key(name: str) -> SessionKey | None:
    """Decode a file name made by :func:`key_to_filename`.

    Returns ``None`` for hashed names (upper case or very long keys: read the
    metadata line instead) and for names this store did not make.
    """
    if not name.endswith(SUFFIX):
        return None
    stem = name[: -len(SUFFIX)]
    if "~" in stem:
        return None
    parts = stem.split("+")
    if len(parts) != 3:
        return None
    try:
        return SessionKey(*(_unescape(p) for p in parts))
    except (SessionError, UnicodeDecodeError, UnicodeEncodeError):
        return None


def dump_dt(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise SessionError(f"session timestamps must be timezone-aware, got naive {value!r}")
    return value.astimezone(UTC).isoformat()


def load_dt(value: Any, where: str, field: str) -> datetime:
    """Parse an ISO-8601 time; a time without offset is taken as UTC."""
    if not isinstance(value, str):
        raise SessionError(f"{where}: {field} must be an ISO-8601 time, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise SessionError(f"{where}: {field} is not an ISO-8601 time: {value!r}") from exc
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def dumps_line(obj: dict[str, Any]) -> bytes:
    """One JSON line (UTF-8, newline-terminated); text stays readable where it can."""
    text = json.dumps(obj, ensure_ascii=False)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: fall back to \\u escapes
        data = json.dumps(obj).encode("ascii")
    return data + b"\n"


def loads_line(raw: bytes, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SessionError(f"{where}: not valid UTF-8 ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise SessionError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(obj, dict):
        raise SessionError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def meta_to_obj(meta: SessionMeta, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The metadata line as a dict; top-level fields of ``base`` we do not know are kept."""
    obj: dict[str, Any] = dict(base or {})
    obj.update(
        {
            "_type": "metadata",
            "key": str(meta.key),
            "created_at": dump_dt(meta.created_at),
            "updated_at": dump_dt(meta.updated_at),
            "last_user_at": dump_dt(meta.last_user_at),
            "metadata": meta.metadata,
        }
    )
    return obj


def meta_from_obj(obj: dict[str, Any], where: str) -> SessionMeta:
    if obj.get("_type") != "metadata":
        raise SessionError(f"{where}: the first line must be the metadata line (_type: metadata)")
    key_text = obj.get("key")
    if not isinstance(key_text, str):
        raise SessionError(f"{where}: metadata line has no key")
    try:
        key = SessionKey.parse(key_text)
    except SessionError as exc:
        raise SessionError(f"{where}: {exc}") from exc
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise SessionError(f"{where}: metadata must be a JSON object, got {metadata!r}")
    last_user = obj.get("last_user_at")
    return SessionMeta(
        key=key,
        created_at=load_dt(obj.get("created_at"), where, "created_at"),
        updated_at=load_dt(obj.get("updated_at"), where, "updated_at"),
        last_user_at=None if last_user is None else load_dt(last_user, where, "last_user_at"),
        metadata=metadata,
    )


def message_to_obj(message: Message) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "role": message.role,
        "content": message.content,
        "timestamp": dump_dt(message.timestamp),
    }
    for name in _MESSAGE_OPTIONAL:
        value = getattr(message, name)
        if value is not None:
            obj[name] = value
    if message.metadata:
        obj["metadata"] = message.metadata
    return obj


def message_from_obj(obj: dict[str, Any], where: str) -> Message:
    role = obj.get("role")
    if not isinstance(role, str) or not role:
        raise SessionError(f"{where}: message has no role")
    content = obj.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise SessionError(f"{where}: message content must be text, got {type(content).__name__}")
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise SessionError(f"{where}: message metadata must be a JSON object")
    return Message(
        role=role,
        content=content,
        timestamp=load_dt(obj.get("timestamp"), where, "timestamp"),
        tool_calls=obj.get("tool_calls"),
        tool_call_id=obj.get("tool_call_id"),
        name=obj.get("name"),
        usage=obj.get("usage"),
        metadata=metadata,
    )


def counts_as_user(message: Message) -> bool:
    """A user interaction: role ``user`` and not a heartbeat or bookkeeping turn."""
    if message.role != "user":
        return False
    return not (message.metadata.get("heartbeat") or message.metadata.get("bookkeeping"))
