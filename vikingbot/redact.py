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


# A command line's secrets: the argument after a flag that names one (``--api-key V``,
# ``-token V``), or the value of ``--api-key=V``; an MCP entry's ``secret_args`` names more
# flags. A URL's path segment that looks like a key: 20+ characters of letters, digits,
# ``-``/``_``, at least 3 of them digits, in an http(s)/ws(s) URL
# (``https://mcp.example/sse/AbC123...``).
_SECRET_FLAG = re.compile(
    r"^--?[A-Za-z0-9_.-]*?(?:key|token|secret|password|passwd|pwd|auth|credential)"
    r"[A-Za-z0-9_.-]*$",
    re.IGNORECASE,
)
_PATH_KEY = re.compile(r"^[A-Za-z0-9_-]{20,}$")


def secret_args(args: list[str], more_flags: Iterable[str] = ()) -> set[str]:
    """The arguments of a command line that are secrets (see above)."""
    extra = {f.strip() for f in more_flags if f.strip()}
    found: set[str] = set()
    for i, arg in enumerate(args[:1000]):
        if not isinstance(arg, str):
            continue
        flag, eq, value = arg.partition("=")
        is_flag = bool(_SECRET_FLAG.match(flag)) or flag in extra
        if is_flag and eq and value:
            found.add(value)
        elif is_flag and not eq and i + 1 < len(args):
            following = args[i + 1]
            if isinstance(following, str) and following and not following.startswith("-"):
                found.add(following)
    return found


def secret_path_parts(url: str) -> set[str]:
    """The path segments of ``url`` that look like keys (see above)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https", "ws", "wss"):
        return set()
    path = rest.partition("/")[2].split("?", 1)[0].split("#", 1)[0]
    return {
        part
        for part in path.split("/")[:50]
        if _PATH_KEY.match(part)
        and sum(c.isdigit() for c in part) >= 3
        and any(c.isalpha() for c in part)
    }


def mask_command(args: list[str], more_flags: Iterable[str] = ()) -> list[str]:
    """``args`` with the secrets :func:`secret_args` finds replaced by ``***``."""
    found = secret_args(args, more_flags)
    out = []
    for arg in args:
        flag, eq, value = arg.partition("=")
        if eq and value in found:
            out.append(f"{flag}={MASK}")
        else:
            out.append(MASK if arg in found else arg)
    return out


def mask_identity(text: str) -> str:
    """A command line or ``<type> <url>`` as shown: :func:`mask_command` over its words,
    key-like URL path segments and every other known secret masked."""
    words = mask_command(text.split(" "))
    for i, word in enumerate(words):
        for part in _url_secrets(word):
            words[i] = words[i].replace(part, MASK)
    return mask_text(" ".join(words))


def _url_secrets(value: str) -> set[str]:
    found: set[str] = set()
    if "://" in value:
        for word in value.split()[:100]:
            found |= secret_path_parts(word)
    return found


def secrets_in(value: Any, name: str = "", *, in_secret_map: bool = False) -> set[str]:
    """Every value :func:`mask_tree` would hide in ``value`` (plus ``SecretStr`` values and
    URL passwords), to :func:`remember`."""
    found: set[str] = set()
    if isinstance(value, dict):
        secret_map = name in _SECRET_MAPS
        for k, v in value.items():
            found |= secrets_in(v, str(k), in_secret_map=secret_map)
        args, more = value.get("args"), value.get("secret_args") or value.get("secretArgs") or []
        if isinstance(args, list) and isinstance(more, list):
            found |= secret_args([a for a in args if isinstance(a, str)], more)
    elif isinstance(value, list | tuple):
        for v in value:
            found |= secrets_in(v, name)
    elif hasattr(value, "get_secret_value"):
        found |= secrets_in(value.get_secret_value(), name, in_secret_map=True)
    elif isinstance(value, str) and value:
        if in_secret_map or is_secret_name(name):
            found.add(value)
        found.update(m.group(2) for m in _URL_PASSWORD_VALUE.finditer(value))
        found |= _url_secrets(value)
    return found


_URL_PASSWORD_VALUE = re.compile(r"(://[^:/@\s]*:)([^@/\s]+)@")


def mask_tree(value: Any, name: str = "", *, in_secret_map: bool = False) -> Any:
    """A JSON-like value with every secret in it masked; ``name`` is the key it sits under."""
    if isinstance(value, dict):
        secret_map = name in _SECRET_MAPS
        out = {k: mask_tree(v, str(k), in_secret_map=secret_map) for k, v in value.items()}
        args, more = value.get("args"), value.get("secret_args") or value.get("secretArgs") or []
        if isinstance(args, list) and all(isinstance(a, str) for a in args):
            out["args"] = [
                mask_text(a) for a in mask_command(args, more if isinstance(more, list) else [])
            ]
        return out
    if isinstance(value, list):
        return [mask_tree(v, name) for v in value]
    if isinstance(value, str):
        if value and (in_secret_map or is_secret_name(name)):
            return MASK
        for part in _url_secrets(value):
            value = value.replace(part, MASK)
        return mask_text(value)
    return value
