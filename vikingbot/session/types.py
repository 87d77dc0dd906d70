"""Session data types: the key, the metadata line and one message."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vikingbot.errors import SessionError

DOCTOR = "doctor"  # the session type of `vikingbot doctor --live`'s connection test


@dataclass(frozen=True, order=True)
class SessionKey:
    """Identifies one conversation.

    ``type`` is the channel kind (``slack``, ``telegram``, ``cli``, ``webhook``,
    ``heartbeat``, ``cron``); ``channel_id`` names the channel instance or
    workspace (a Slack team, a bot name, ``default``); ``chat_id`` is the chat
    inside it. The string form is ``type:channel_id:chat_id``; ``chat_id`` may
    itself contain ``:``.
    """

    type: str
    channel_id: str
    chat_id: str

    def __post_init__(self) -> None:
        for name in ("type", "channel_id", "chat_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise SessionError(f"session key {name} must be a non-empty string, got {value!r}")
        if ":" in self.type or ":" in self.channel_id:
            raise SessionError(
                f"session key type and channel_id may not contain ':' "
                f"(got {self.type!r}, {self.channel_id!r})"
            )

    def __str__(self) -> str:
        return f"{self.type}:{self.channel_id}:{self.chat_id}"

    @classmethod
    def parse(cls, text: str) -> SessionKey:
        """Parse ``type:channel_id:chat_id`` (or ``type:chat_id`` meaning channel ``default``)."""
        parts = text.split(":", 2)
        if len(parts) == 3:
            return cls(parts[0], parts[1], parts[2])
        if len(parts) == 2:
            return cls(parts[0], "default", parts[1])
        raise SessionError(f"bad session key {text!r}: expected type:channel_id:chat_id")


@dataclass
class Message:
    role: str  # "user" | "assistant" | "tool" | "system"
    content: str
    timestamp: datetime
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    usage: dict[str, int] | None = None  # {"input": n, "output": m}
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class SessionMeta:
    key: SessionKey
    created_at: datetime
    updated_at: datetime
    last_user_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def skip_heartbeat(self) -> bool:
        return bool(self.metadata.get("skip_heartbeat", False))
