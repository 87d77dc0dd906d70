"""The heartbeat reply protocol: HEARTBEAT_OK and HEARTBEAT_KEEP.

Pure functions shared by the agent loop (which must not write a no-op reply to
history) and the heartbeat (which must not deliver one). One definition, so the
two can never disagree about what "nothing to do" looks like.
"""

from __future__ import annotations

import re

OK_TOKEN = "HEARTBEAT_OK"
KEEP_TOKEN = "HEARTBEAT_KEEP"
DEFAULT_ACK_MAX_CHARS = 300

_DECOR = r"[*_`~\s]*"
_OK = rf"{_DECOR}heartbeat[\s_]*ok{_DECOR}"
_TRAIL = r"[.!?,;:。！\s]*"
# "_" counts as part of a word here, so HEARTBEAT_OK_STATUS is not the token,
# while _HEARTBEAT_OK_ (Markdown emphasis) still is.
_OK_START = re.compile(rf"^{_OK}(?![a-z0-9_])", re.IGNORECASE)
_OK_END = re.compile(rf"(?<![a-z0-9_]){_OK}{_TRAIL}$", re.IGNORECASE)
_KEEP = re.compile(r"heartbeat[\s_]*keep", re.IGNORECASE)
_ANY_TOKEN = re.compile(
    r"(?<![a-z0-9_])[*_`~]*heartbeat[\s_]*(?:ok|keep)[*_`~]*(?![a-z0-9_])[.!]?", re.IGNORECASE
)


def normalise(reply: str | None) -> str:
    """Trim, upper-case, drop ``_``/spaces, emphasis, backticks and trailing punctuation."""
    if not reply:
        return ""
    s = reply.strip().upper()
    s = re.sub(r"[\s_*`~]", "", s)
    return s.rstrip(".!?,;:。！")


def is_noop(reply: str | None, ack_max_chars: int = DEFAULT_ACK_MAX_CHARS) -> bool:
    """True when a reply means "nothing needs attention".

    A no-op is an empty reply, a reply that normalises to ``HEARTBEATOK``, or a
    reply that begins or ends with the token and carries at most
    ``ack_max_chars`` other characters. A token in the middle of a longer reply
    is ordinary text.
    """
    if reply is None or not reply.strip():
        return True
    if normalise(reply) == "HEARTBEATOK":
        return True
    text = reply.strip()
    m = _OK_START.match(text)
    if m:
        return len(text[m.end() :].strip()) <= ack_max_chars
    m = _OK_END.search(text)
    if m:
        return len(text[: m.start()].strip()) <= ack_max_chars
    return False


def wants_keep(reply: str | None) -> bool:
    """True when the reply carries ``HEARTBEAT_KEEP`` (case-insensitive, anywhere)."""
    return bool(reply and _KEEP.search(reply))


def strip_tokens(text: str) -> str:
    """Remove HEARTBEAT_OK / HEARTBEAT_KEEP from text that will reach a user."""
    cleaned = _ANY_TOKEN.sub("", text)
    cleaned = re.sub(r"[ \t]{2,}", " ", cleaned)
    cleaned = re.sub(r"[ \t]+\n", "\n", cleaned)
    cleaned = re.sub(r"\n{3,}", "\n\n", cleaned)
    return cleaned.strip()
