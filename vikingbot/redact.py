"""Hiding secrets in text and data shown to people (pure): config output, status, logs.

A value is shown as ``***`` when its key names a secret (``token``,
``password``, ``apiKey``, ``secret``, ``authorization``, ...; ``maxTokens`` is
not one), or when it sits in a map of values that are often secrets (a
checker's ``headers`` and ``env``). Inside any text, a URL's password
(``postgresql://u:***@db``) and secret-looking query parameters
(``?token=***``) are masked too, so a secret that reached the config through
``${VAR}`` or ``.env`` is hidden wherever it landed. ``SecretStr`` fields are
masked by the config code before these rules run.
"""

from __future__ import annotations

import re
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


def mask_text(text: str) -> str:
    """``text`` with URL passwords and secret query parameters replaced by ``***``."""
    if "://" not in text and "=" not in text:
        return text
    return _QUERY_SECRET.sub(rf"\1{MASK}", mask_url(text))


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
