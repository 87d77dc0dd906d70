"""Delivery targets: the grammar of ``deliver:TARGET`` tags and ``bot.heartbeat.target``.

Pure parsing, no I/O. A target comes from an untrusted place (HEARTBEAT.md is
agent-writable), so the grammar is strict: anything that is not exactly one of
the forms below is a :class:`~vikingbot.errors.DeliveryError`, and the caller
delivers to the owner instead.

    owner | last | all | none | silent
    <channel> | <channel>: | <channel>:<chat_id> | <channel>:<chat_id>:<thread>
    dashboard | dashboard:<slot> | prompt:dashboard | prompt:dashboard:<slot>

Channel names match ``[a-z][a-z0-9_-]*`` and must be known; chat and thread ids
match ``[A-Za-z0-9_.@+-]{1,128}``, or are sigil ids as Matrix writes them: ``!``,
``#``, ``$`` or ``@``, then ``[A-Za-z0-9_.=+-]{1,255}``, then optionally a server
part ``:host`` or ``:host:port`` (``matrix:!abc:example.org:$event``); slots match
``[A-Za-z0-9_-]{1,64}``. An empty
chat id (``slack:``) or a bare channel (``slack``) means the owner's chat on that
channel.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from vikingbot.errors import DeliveryError

TargetKind = Literal["owner", "last", "all", "none", "channel", "dashboard", "prompt"]

MAX_TARGET_CHARS = 300
DEFAULT_SLOT = "default"
KEYWORDS = frozenset({"owner", "last", "all", "none", "silent", "dashboard", "prompt"})

_CHANNEL = re.compile(r"[a-z][a-z0-9_-]{0,49}")
_ID = re.compile(r"[A-Za-z0-9_.@+-]{1,128}")
_SLOT = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SIGIL_ID = re.compile(r"[!#$@][A-Za-z0-9_.=+-]{1,255}(?::[A-Za-z0-9.-]{1,255}(?::[0-9]{1,5})?)?")


@dataclass(frozen=True)
class Target:
    """A parsed target. ``chat_id`` None on a channel target means "the owner's chat there"."""

    kind: TargetKind
    channel: str | None = None
    chat_id: str | None = None
    thread: str | None = None
    slot: str | None = None

    def __str__(self) -> str:
        if self.kind == "channel":
            text = f"{self.channel}:{self.chat_id or ''}"
            return f"{text}:{self.thread}" if self.thread else text
        if self.kind == "dashboard":
            return f"dashboard:{self.slot}"
        if self.kind == "prompt":
            return f"prompt:dashboard:{self.slot}"
        return self.kind


def _known_channels() -> frozenset[str]:
    from vikingbot import registry

    return frozenset(registry.names("channels"))


def _check_chars(text: str) -> None:
    if len(text) > MAX_TARGET_CHARS:
        raise DeliveryError(f"target is longer than {MAX_TARGET_CHARS} characters")
    for ch in text:
        if ch.isspace() or not ch.isprintable() or ord(ch) > 126:
            raise DeliveryError(f"target contains a forbidden character {ch!r}")
    if ".." in text:
        raise DeliveryError("target contains '..'")


def _id(value: str, what: str) -> str:
    if not _ID.fullmatch(value) and not _SIGIL_ID.fullmatch(value):
        raise DeliveryError(
            f"bad {what} {value!r}: expected 1-128 of A-Z a-z 0-9 _ . @ + -, "
            "or a sigil id like !room:example.org"
        )
    return value


def _chat_and_thread(rest: str) -> tuple[str, str, int]:
    """``rest`` cut into chat id, thread id and how many more ``:`` parts followed."""
    sigil = _SIGIL_ID.match(rest)
    if sigil is not None and (sigil.end() == len(rest) or rest[sigil.end()] == ":"):
        chat, tail = rest[: sigil.end()], rest[sigil.end() + 1 :]
        thread = _SIGIL_ID.match(tail)
        if thread is not None and thread.end() == len(tail):
            return chat, tail, 0
        parts = tail.split(":") if tail else [""]
        return chat, parts[0], len(parts) - 1
    parts = rest.split(":")
    return parts[0], parts[1] if len(parts) > 1 else "", max(len(parts) - 2, 0)


def _slot(value: str) -> str:
    if value == "":
        return DEFAULT_SLOT
    if not _SLOT.fullmatch(value):
        raise DeliveryError(f"bad dashboard slot {value!r}: expected 1-64 of A-Z a-z 0-9 _ -")
    return value


def parse_target(text: str, *, known_channels: Collection[str] | None = None) -> Target:
    """Parse one target; raise :class:`DeliveryError` naming what is wrong.

    ``known_channels`` defaults to every channel in the registry.
    """
    if not isinstance(text, str):
        raise DeliveryError(f"target must be text, got {type(text).__name__}")
    if len(text) > MAX_TARGET_CHARS:
        raise DeliveryError(f"target is longer than {MAX_TARGET_CHARS} characters")
    text = text.strip(" ")
    if not text:
        raise DeliveryError("target is empty")
    _check_chars(text)

    if text in ("none", "silent"):
        return Target("none")
    if text in ("owner", "last", "all"):
        return Target(text)  # type: ignore[arg-type]

    head, sep, rest = text.partition(":")
    if head == "dashboard":
        if ":" in rest:
            raise DeliveryError(f"bad dashboard target {text!r}: expected dashboard:<slot>")
        return Target("dashboard", slot=_slot(rest))
    if head == "prompt":
        sub, _, slot = rest.partition(":")
        if sub != "dashboard" or ":" in slot:
            raise DeliveryError(f"bad prompt target {text!r}: expected prompt:dashboard:<slot>")
        return Target("prompt", slot=_slot(slot))
    if head in KEYWORDS:
        raise DeliveryError(f"{head!r} takes no ':' part")

    if not _CHANNEL.fullmatch(head):
        raise DeliveryError(f"bad channel name {head!r}: expected [a-z][a-z0-9_-]*")
    known = _known_channels() if known_channels is None else known_channels
    if head not in known:
        names = ", ".join(sorted(known)) or "none"
        raise DeliveryError(f"unknown channel {head!r} (known: {names})")
    if not sep:
        return Target("channel", channel=head)

    chat, thread, extra = _chat_and_thread(rest)
    if extra:
        raise DeliveryError(f"bad target {text!r}: expected <channel>:<chat_id>:<thread>")
    if chat == "":
        if thread:
            raise DeliveryError(f"bad target {text!r}: a thread needs a chat id")
        return Target("channel", channel=head)
    return Target(
        "channel",
        channel=head,
        chat_id=_id(chat, "chat id"),
        thread=_id(thread, "thread id") if thread else None,
    )
