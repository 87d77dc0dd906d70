"""The heartbeat reply protocol: HEARTBEAT_OK and HEARTBEAT_KEEP.

Pure functions shared by the agent loop (which must not write a no-op reply to
history) and the heartbeat (which must not deliver one). One definition, so the
two can never disagree about what "nothing to do" looks like.

A token is ``HEARTBEAT_OK`` / ``HEARTBEAT_KEEP`` in any case, with ``_``,
spaces or nothing between the words (``HEART BEAT_OK`` too: the normalised form
drops spaces and underscores, as OpenViking's does), not part of a longer word
(``HEARTBEAT_OK_STATUS`` is ordinary text), together with the markup that wraps
it as a pair: HTML tags (``<b>…</b>``, ``<code>…</code>``) and Markdown bold,
italics, strike-through and code (``**``, ``_``, ``~~``, backticks). Every
function here is linear in the length of the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

OK_TOKEN = "HEARTBEAT_OK"
KEEP_TOKEN = "HEARTBEAT_KEEP"
DEFAULT_ACK_MAX_CHARS = 300

_CORE = re.compile(r"heart[\s_]{0,4}beat[\s_]{0,4}(ok|keep)", re.IGNORECASE)
_MD = "*_`~"
_PUNCT = ".!?,;:。！"
_OPEN_TAG = re.compile(r"<([A-Za-z][A-Za-z0-9]{0,15})(?:\s[^<>]{0,200})?>$")
_ANY_TAG = re.compile(r"</?[A-Za-z][^<>]{0,200}>")
_MAX_WRAPS = 16


@dataclass(frozen=True, slots=True)
class _Token:
    start: int  # including the markup around it
    end: int
    kind: Literal["ok", "keep"]


def _tokens(text: str) -> list[_Token]:
    found: list[_Token] = []
    for m in _CORE.finditer(text):
        start, end = m.span()
        before = text[max(0, start - 64) : start].rstrip(_MD)
        after = text[end : end + 64].lstrip(_MD)
        if (before and before[-1].isalnum()) or (after and after[0].isalnum()):
            continue  # part of a longer word: HEARTBEAT_OK_STATUS, HEARTBEAT_OKAY
        start, end = _wrap(text, start, end)
        kind: Literal["ok", "keep"] = "ok" if m.group(1).lower() == "ok" else "keep"
        found.append(_Token(start, end, kind))
    return found


def _wrap(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen ``[start, end)`` over markup that opens right before it and closes right after."""
    for _ in range(_MAX_WRAPS):
        if start and end < len(text) and text[start - 1] in _MD and text[end] == text[start - 1]:
            start, end = start - 1, end + 1
            continue
        if start and text[start - 1] == ">":
            tag = _OPEN_TAG.search(text, max(0, start - 220), start)
            close = f"</{tag.group(1)}>" if tag else ""
            if tag and text[end : end + len(close)].lower() == close.lower():
                start, end = tag.start(), end + len(close)
                continue
        break
    return start, end


def _visible(text: str) -> str:
    """The text without tags, Markdown markup, punctuation and whitespace."""
    text = _ANY_TAG.sub("", text)
    return "".join(c for c in text if not (c.isspace() or c in _MD or c in _PUNCT))


def normalise(reply: str | None) -> str:
    """Trim, upper-case, drop ``_``/spaces, emphasis, backticks and trailing punctuation."""
    if not reply:
        return ""
    s = reply.strip().upper()
    s = re.sub(r"[\s_*`~]", "", s)
    return s.rstrip(_PUNCT)


def is_noop(reply: str | None, ack_max_chars: int = DEFAULT_ACK_MAX_CHARS) -> bool:
    """True when a reply means "nothing needs attention".

    A no-op is a reply with nothing visible in it (empty, whitespace, only
    markup), a reply that is only ``HEARTBEAT_OK`` tokens, or a reply that
    begins or ends with the token and carries at most ``ack_max_chars`` other
    characters. A token in the middle of a longer reply is ordinary text.
    """
    if reply is None or not reply.strip():
        return True
    oks = [t for t in _tokens(reply) if t.kind == "ok"]
    if not oks:
        return not _visible(reply)
    rest = "".join(reply[a:b] for a, b in _gaps(reply, oks))
    if not _visible(rest):
        return True
    first, last = oks[0], oks[-1]
    if not _visible(reply[: first.start]):
        return len(reply[first.end :].strip()) <= ack_max_chars
    if not _visible(reply[last.end :]):
        return len(reply[: last.start].strip()) <= ack_max_chars
    return False


def _gaps(text: str, tokens: list[_Token]) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for t in tokens:
        spans.append((pos, t.start))
        pos = t.end
    spans.append((pos, len(text)))
    return spans


def wants_keep(reply: str | None) -> bool:
    """True when the reply carries ``HEARTBEAT_KEEP`` (any case, anywhere, as a word)."""
    return bool(reply) and any(t.kind == "keep" for t in _tokens(reply or ""))


def strip_tokens(text: str) -> str:
    """Remove HEARTBEAT_OK / HEARTBEAT_KEEP and their markup from text that will reach a user.

    Only the tokens go, with the space and line they leave empty: a sentence
    that ends with the token keeps its own full stop (``I should not respond
    HEARTBEAT_OK.`` becomes ``I should not respond.``); punctuation after a
    token that starts a line goes with it.
    """
    tokens = _tokens(text)
    if not tokens:
        return text.strip()
    out = text[: tokens[0].start]
    for n, t in enumerate(tokens):
        stop = tokens[n + 1].start if n + 1 < len(tokens) else len(text)
        out = _join(out, text[t.end : stop])
    return out.strip()


def _join(left: str, right: str) -> str:
    """Close the gap a token left between ``left`` and ``right``."""
    line_start = left.rfind("\n") + 1
    line_blank = not left[line_start:].strip()
    punct = len(right) - len(right.lstrip(_PUNCT))
    if punct:
        if line_blank or left.rstrip()[-1:] in tuple(_PUNCT):
            right = right[punct:]  # "HEARTBEAT_OK. Disk is fine" / "Status: HEARTBEAT_OK."
        else:
            return left.rstrip(" \t") + right  # "I should not respond." keeps its period
    rest = right.lstrip(" \t")
    if line_blank:
        if rest.startswith("\n") or not rest:
            rest = rest[1:]  # the token had the line to itself: the line goes
        return left[:line_start] + rest
    if rest.startswith("</"):
        return left.rstrip(" \t") + rest
    if rest.startswith("\n") or not rest:
        newlines = len(rest) - len(rest.lstrip("\n"))
        return left.rstrip(" \t") + "\n" * min(newlines, 2) + rest[newlines:]
    return left.rstrip(" \t") + " " + rest
