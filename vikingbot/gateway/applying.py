"""What a running gateway does with a changed config, and what it tells (issue 42).

Most keys are read at run time and apply at once (the heartbeat, the agent, its
provider and key, tools, delivery); channels are started, stopped or restarted
(``channels/reconcile.py``). The keys in :data:`RESTART_KEYS` are read once, when
the gateway starts (its address, its database, the sandbox layout, the agent loop's
kind): :func:`needs_restart` names those that differ from the config the gateway
started with, so ``config set``, ``doctor`` and ``channels status`` can say
"restart the gateway to apply". Pure; the gateway does the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vikingbot.config.edit import get_value, to_plain
from vikingbot.config.schema import Config
from vikingbot.errors import ConfigError

#: Keys read only when the gateway starts (dotted, snake_case).
RESTART_KEYS: tuple[str, ...] = (
    "bot.gateway.host",
    "bot.gateway.port",
    "bot.gateway.token",
    "bot.gateway.allowed_hosts",
    "bot.gateway.head_timeout_s",
    "bot.gateway.body_timeout_s",
    "bot.gateway.lease_s",
    "bot.sandbox.mode",
    "bot.agents.loop",
    "storage.workspace",
    "storage.database_url",
)

RESTART_HINT = "restart the gateway to apply"


def needs_restart(started: Config, now: Config) -> list[str]:
    """The keys of :data:`RESTART_KEYS` whose value in ``now`` differs from ``started``."""
    return [key for key in RESTART_KEYS if _value(started, key) != _value(now, key)]


def waiting_for_restart(key: str, restart_needed: list[str]) -> list[str]:
    """Those of ``restart_needed`` that ``key`` (any spelling) is, or lies under or over."""
    from vikingbot.config.edit import canonical_key

    try:
        wanted = canonical_key(key)
    except ConfigError:
        return []
    return [
        known
        for known in restart_needed
        if wanted == known or wanted.startswith(known + ".") or known.startswith(wanted + ".")
    ]


def _value(config: Config, key: str) -> Any:
    try:
        return to_plain(get_value(config, key), reveal=True, name=key)
    except ConfigError:
        return None


@dataclass
class Report:
    """One reload: its number, what the channels did, what waits for a restart."""

    generation: int
    applied: bool
    error: str | None = None
    channels: list[dict[str, Any]] = field(default_factory=list)
    restart_needed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "applied": self.applied,
            "error": self.error,
            "channels": self.channels,
            "restart_needed": self.restart_needed,
        }
