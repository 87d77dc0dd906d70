"""What a checker is: its result type, its base class and the helpers kinds share.

A checker answers two questions without a model: is there work, and what is
its signature (a short stable hash of the news, so the heartbeat wakes the
agent once per piece of news). It never stores a watermark itself; the
heartbeat compares signatures.

Checker kinds are registered in the ``vikingbot.checkers`` entry-point group
and constructed as ``Kind(name, config, state_dir=..., environ=...)``.
"""

from __future__ import annotations

import hashlib
import re
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from vikingbot.errors import CheckerError

if TYPE_CHECKING:
    from vikingbot.config.schema import CheckerConfig

CONTEXT_CAP = 4000
"""Most characters of checker context handed to the agent."""

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_MIN_SECRET_LEN = 4
_SECRET_WORDS = ("authorization", "cookie", "token", "key", "secret", "password", "passwd")


@dataclass(frozen=True)
class CheckResult:
    """A checker's answer.

    ``failed_open`` is true when the check itself failed and the entry runs as
    if there were work (the default ``fail: open`` rule); ``error`` then says why.
    """

    has_work: bool
    signature: str | None = None
    context: str | None = None
    error: str | None = None
    failed_open: bool = False


def signature_of(*parts: str | bytes) -> str:
    """Short stable hash of the normalised content (first 32 hex chars of SHA-256)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:32]


def cap_context(text: str | None, limit: int = CONTEXT_CAP) -> str | None:
    """Trim context to ``limit`` characters, saying so; empty text becomes None."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        return None
    if len(text) <= limit:
        return text
    note = f"\n[... truncated, {len(text) - limit} more characters]"
    return text[: max(0, limit - len(note))] + note


def redact(text: str | None, secrets: Iterable[str]) -> str | None:
    """Replace every secret value in ``text`` with ``***``."""
    if text is None:
        return None
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= _MIN_SECRET_LEN:
            text = text.replace(secret, "***")
    return text


def looks_secret(name: str) -> bool:
    """Does a header or variable name suggest its value is a secret (``API_KEY``, ``Cookie``)?"""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


@cache
def tls_context() -> ssl.SSLContext:
    """One verifying TLS context for all checker HTTP clients (building one is slow)."""
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi comes with httpx
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


def snake_case(key: str) -> str:
    return _CAMEL.sub("_", key).lower().replace("-", "_")


class Checker:
    """Base class for checker kinds.

    Subclasses set ``kind`` and ``options`` (the option names they accept, in
    snake_case), override ``check`` and, if they have options to verify,
    ``validate``. ``scopes`` lists the scopes a kind understands (None: any).
    """

    kind: ClassVar[str] = "checker"
    options: ClassVar[frozenset[str] | None] = None
    scopes: ClassVar[tuple[str, ...] | None] = None

    def __init__(
        self,
        name: str,
        config: CheckerConfig,
        *,
        state_dir: Path,
        environ: Mapping[str, str],
    ) -> None:
        self.name = name
        self.config = config
        self.state_dir = state_dir
        self.environ = environ
        self.secrets: set[str] = set()
        extra = config.model_extra or {}
        self.opts: dict[str, Any] = {snake_case(k): v for k, v in extra.items()}

    # -- to override ------------------------------------------------------

    def validate(self) -> None:
        """Refuse bad options (raise CheckerError); called before every check."""
        if self.options is None:
            return
        unknown = sorted(set(self.opts) - self.options)
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise CheckerError(
                f"{self.where}: unknown option {', '.join(map(repr, unknown))} "
                f"(kind {self.kind!r} accepts: {known})"
            )

    async def check(self, scope: str | None) -> CheckResult:
        raise NotImplementedError

    def missing(self) -> str | None:
        """What the checker lacks to run at all (a credential), said with the fix; None
        when nothing is missing. No I/O: `vikingbot doctor` asks every checker."""
        return None

    # -- helpers for kinds ------------------------------------------------

    @property
    def where(self) -> str:
        """Where this checker is configured, for error messages."""
        return f"bot.heartbeat.checkers.{self.name}"

    def opt_str(self, key: str, default: str | None = None, *, required: bool = False) -> str:
        value = self.opts.get(key, default)
        if value is None:
            if required:
                raise CheckerError(f"{self.where}: option {key!r} is required for kind {self.kind}")
            return ""
        if not isinstance(value, str):
            raise CheckerError(f"{self.where}.{key}: expected a string, got {value!r}")
        return value

    def opt_str_list(self, key: str) -> list[str] | None:
        value = self.opts.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise CheckerError(f"{self.where}.{key}: expected a list of strings, got {value!r}")
        return list(value)

    def opt_str_map(self, key: str) -> dict[str, str]:
        value = self.opts.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise CheckerError(f"{self.where}.{key}: expected a mapping of strings to strings")
        return dict(value)

    def resolve(self, value: str, *, what: str) -> str:
        """Expand ``${NAME}`` references from the environment; the values are secrets."""

        def sub(match: re.Match[str]) -> str:
            var = match.group(1)
            found = self.environ.get(var)
            if not found:
                raise CheckerError(
                    f"{self.where}: {what} refers to ${{{var}}}, "
                    f"but the environment variable {var} is not set"
                )
            self.secrets.add(found)
            return found

        return _REF.sub(sub, value)

    def require_scope(self, scope: str | None) -> str:
        """The scope to use: the given one, else the kind's first; unknown ones refused."""
        if self.scopes is None:
            return scope or ""
        chosen = scope or self.scopes[0]
        if chosen not in self.scopes:
            raise CheckerError(
                f"unknown scope {chosen!r} for {self.kind} checker {self.name!r} "
                f"(known: {', '.join(self.scopes)})"
            )
        return chosen


def substitute_scope(text: str, scope: str | None, *, where: str) -> str:
    """Replace ``{scope}`` in an option; refuse when the entry gave no scope."""
    if "{scope}" not in text:
        return text
    if not scope:
        raise CheckerError(
            f"{where} uses {{scope}}, but the entry gave none: write only-if: NAME:SCOPE"
        )
    return text.replace("{scope}", scope)
