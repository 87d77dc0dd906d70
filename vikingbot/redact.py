"""Hiding secrets in text and data shown to people (pure): config output, status, logs.

A value is shown as ``***`` when its key names a secret (``token``,
``password``, ``apiKey``, ``secret``, ``authorization``, ...; ``maxTokens`` is
not one), or when it sits in a map of values that are often secrets (a
checker's ``headers`` and ``env``). Inside any text, a URL's password
(``postgresql://u:***@db``) and secret-looking query parameters
(``?token=***``) are masked too, so a secret that reached the config through
``${VAR}`` or ``.env`` is hidden wherever it landed. ``SecretStr`` fields are
masked by the config code before these rules run.

Exception text is the other way secrets leak: a provider error that echoes the
API key, a database error that carries its URL. So ``mask_text`` also hides
``Bearer``/``Basic`` credentials, ``password=...`` pairs (libpq connection
strings), well-known token shapes (``sk-...``, ``xoxb-...``, Telegram's
``bot123:ABC...``) and every secret value the loaded config holds
(:func:`remember`, called by the config loader with :func:`secrets_in`), whatever
text they turn up in. The log patcher (``logs.py``, tracebacks included) and the
CLI's error printer both run every line through it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@/\s]*@")


def mask_url(url: str) -> str:
    """A URL with any password replaced by ``***`` (``postgresql://me:***@db/x``)."""
    return _URL_PASSWORD.sub(r"\1***@", url)


MASK = "***"
_SECRET_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "apikey",
        "credential",
        "credentials",
        "cookie",
        "authorization",
        "auth",
        "passphrase",
    }
)
_KEY_QUALIFIERS = frozenset({"api", "private", "secret", "access", "signing", "client"})
_SECRET_MAPS = frozenset({"headers", "env"})
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_QUERY_SECRET = re.compile(
    r"([?&](?:[A-Za-z0-9_-]*(?:token|key|secret|password|sig|signature|auth))=)[^&#\s]*",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """Whether a config key names a secret: ``bot_token``, ``apiKey``, ``password``."""
    words = [w.lower() for w in _WORD.findall(name)]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return len(words) >= 2 and words[-1] == "key" and words[-2] in _KEY_QUALIFIERS


# Credentials in free text. Each pattern is a literal prefix and one bounded character
# class: linear time on any input.
_CREDENTIALS = re.compile(
    r"(?P<keep>(?:\b(?i:bearer)|\bBasic)\s+|(?i:\b(?:password|passwd|pwd|secret|token|api[_-]?key)"
    r"\s*[=:]\s*['\"]?))(?P<secret>[^\s'\",;&]{4,})"
    r"|(?P<shape>\bsk-[A-Za-z0-9_-]{16,}|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\bbot[0-9]{5,}:[A-Za-z0-9_-]{20,})"
)
_MIN_REMEMBERED = 6  # shorter values would mask ordinary words
_known: frozenset[str] = frozenset()
_known_lock = threading.Lock()


def remember(secrets: Iterable[str]) -> None:
    """Add secret values (from the loaded config) that every masked text must hide."""
    global _known
    fresh = {s for s in secrets if isinstance(s, str) and len(s.strip()) >= _MIN_REMEMBERED}
    with _known_lock:
        _known = _known | fresh


def forget_all() -> None:
    """Drop the remembered secret values (tests)."""
    global _known
    with _known_lock:
        _known = frozenset()


def _credential(match: re.Match[str]) -> str:
    if match.group("shape"):
        return MASK
    return match.group("keep") + MASK


def mask_text(text: str) -> str:
    """``text`` with URL passwords, secret query parameters, credentials and every
    remembered secret value replaced by ``***``. Linear in ``len(text)`` per secret."""
    known = _known
    for secret in sorted(known, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    if "://" in text or "=" in text:
        text = _QUERY_SECRET.sub(rf"\1{MASK}", mask_url(text))
    return _CREDENTIALS.sub(_credential, text)


def secrets_in(value: Any, name: str = "", *, in_secret_map: bool = False) -> set[str]:
    """Every value :func:`mask_tree` would hide in ``value`` (plus ``SecretStr`` values and
    URL passwords), to :func:`remember`."""
    found: set[str] = set()
    if isinstance(value, dict):
        secret_map = name in _SECRET_MAPS
        for k, v in value.items():
            found |= secrets_in(v, str(k), in_secret_map=secret_map)
    elif isinstance(value, list | tuple):
        for v in value:
            found |= secrets_in(v, name)
    elif hasattr(value, "get_secret_value"):
        found |= secrets_in(value.get_secret_value(), name, in_secret_map=True)
    elif isinstance(value, str) and value:
        if in_secret_map or is_secret_name(name):
            found.add(value)
        found.update(m.group(2) for m in _URL_PASSWORD_VALUE.finditer(value))
    return found


_URL_PASSWORD_VALUE = re.compile(r"(://[^:/@\s]*:)([^@/\s]+)@")


def mask_tree(value: Any, name: str = "", *, in_secret_map: bool = False) -> Any:
    """A JSON-like value with every secret in it masked; ``name`` is the key it sits under."""
    if isinstance(value, dict):
        secret_map = name in _SECRET_MAPS
        return {k: mask_tree(v, str(k), in_secret_map=secret_map) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_tree(v, name) for v in value]
    if isinstance(value, str):
        if value and (in_secret_map or is_secret_name(name)):
            return MASK
        return mask_text(value)
    return value
