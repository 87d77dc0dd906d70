"""A mail's Message-ID as the thread id of a delivery target (pure).

A reply goes to ``email:<address>:<thread>``, and thread ids are limited to
``[A-Za-z0-9_.@+-]{1,128}`` (``delivery/targets.py``). Message-IDs hold more
(``=``, ``$``, ``/``...), so the id between the angle brackets is written with
every other byte as ``_HH`` (``_`` itself too): reversible, and as readable as
the id was. An id too long for that is kept by a digest (``_h`` + 40 hex
digits), which only the channel's memory of recent mails can turn back.
"""

from __future__ import annotations

import hashlib

MAX_THREAD_CHARS = 128
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.@+-")
_HEX = frozenset("0123456789ABCDEF")
DIGEST_PREFIX = "_h"


def thread_of(message_id: str) -> str | None:
    """The thread id for a Message-ID (``<a@b>`` or ``a@b``); None for an empty one."""
    inner = message_id.strip().removeprefix("<").removesuffix(">").strip()
    if not inner:
        return None
    out: list[str] = []
    for byte in inner.encode("utf-8", "replace"):
        ch = chr(byte)
        out.append(ch if ch in _PLAIN else f"_{byte:02X}")
    token = "".join(out)
    if len(token) <= MAX_THREAD_CHARS:
        return token
    return DIGEST_PREFIX + hashlib.sha256(inner.encode("utf-8", "replace")).hexdigest()[:40]


def message_id_of(thread: str) -> str | None:
    """The Message-ID (with angle brackets) a thread id stands for; None for a digest or
    anything this module did not write."""
    if thread.startswith(DIGEST_PREFIX):
        return None
    raw = bytearray()
    i = 0
    while i < len(thread):
        ch = thread[i]
        if ch == "_":
            pair = thread[i + 1 : i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                return None
            raw.append(int(pair, 16))
            i += 3
            continue
        if ch not in _PLAIN:
            return None
        raw.append(ord(ch))
        i += 1
    text = raw.decode("utf-8", "replace")
    if not text or any(c in "<>\r\n" or not c.isprintable() for c in text):
        return None
    return f"<{text}>"
