"""Safe directory names derived from untrusted text (session keys, channel ids).

:func:`safe_name` is pure. Its result is always one path component that is
legal on Linux, macOS and Windows: only ``[A-Za-z0-9._-]``, never ``.`` or
``..``, no leading dot or dash, no trailing dot, no Windows device name (``CON``,
``nul.txt``, ...), at most :data:`MAX_NAME` characters. Text that is already
such a name (and has no upper-case letters) is returned unchanged; anything else
is cleaned and gets ``-`` plus a hash of the original text, so two different
inputs never share a directory, not even on a case-insensitive file system.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 100
_HASH_LEN = 10
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_UPPER = re.compile(r"[A-Z]")
_HASHED = re.compile(rf"-[0-9a-f]{{{_HASH_LEN}}}$")
_RESERVED = frozenset(
    {"con", "prn", "aux", "nul", "conin$", "conout$"}
    | {f"com{i}" for i in range(10)}
    | {f"lpt{i}" for i in range(10)}
)
EMPTY_BASE = "ws"


def is_reserved(name: str) -> bool:
    """A Windows device name, with or without an extension (``CON``, ``nul.txt``)."""
    return name.split(".", 1)[0].rstrip(" ").lower() in _RESERVED


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]


def safe_name(text: str) -> str:
    """One safe path component for ``text`` (see the module docstring)."""
    cleaned = _UNSAFE.sub("_", text).lstrip(".").rstrip(".")
    exact = (
        cleaned == text
        and cleaned != ""
        and not cleaned.startswith("-")
        and len(cleaned) <= MAX_NAME
        and not is_reserved(cleaned)
        and not _UPPER.search(cleaned)
        and not _HASHED.search(cleaned)
    )
    if exact:
        return cleaned
    base = cleaned.strip("._-") or EMPTY_BASE
    base = base[: MAX_NAME - _HASH_LEN - 2].rstrip("._-") or EMPTY_BASE
    name = f"{base}-{_digest(text)}"
    return "_" + name if is_reserved(name) else name
