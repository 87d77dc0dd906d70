"""Which timezone the heartbeat lives in: config, else the machine's (tzlocal), else UTC."""

from __future__ import annotations

from collections.abc import Callable
from zoneinfo import ZoneInfo

from vikingbot.config.zones import known_zone as _zone
from vikingbot.config.zones import local_zone_name
from vikingbot.errors import ConfigError

__all__ = ["UTC_ZONE", "local_zone_name", "resolve_timezone"]

UTC_ZONE = ZoneInfo("UTC")


def resolve_timezone(
    name: str | None, *, local: Callable[[], str | None] = local_zone_name
) -> ZoneInfo:
    """The heartbeat timezone.

    ``name`` (``bot.heartbeat.timezone``) wins and must be a valid IANA name.
    Without it, the machine's zone (``local``, tzlocal by default) if it is an
    IANA zone this Python knows, else UTC.
    """
    if name:
        zone = _zone(name)
        if zone is None:
            raise ConfigError(
                f"bot.heartbeat.timezone: unknown IANA timezone {name!r} (e.g. Europe/Berlin, UTC)"
            )
        return zone
    found = local()
    return (_zone(found) if found else None) or UTC_ZONE
