"""Which timezone the heartbeat lives in: config, else the machine's (tzlocal), else UTC."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vikingbot.errors import ConfigError

UTC_ZONE = ZoneInfo("UTC")


def local_zone_name() -> str | None:
    """The machine's IANA zone name, as tzlocal finds it, or None.

    tzlocal reads ``TZ`` (``Europe/Berlin``, ``:Europe/Berlin`` or a path into a
    zoneinfo directory), then the system's settings (``/etc/timezone``, the
    ``/etc/localtime`` link, systemd's ``timedatectl`` files; the registry on
    Windows). The answer is cached for the life of the process.
    """
    import tzlocal

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "TZ and /etc/localtime disagree": TZ wins
            return tzlocal.get_localzone_name() or None
    except (LookupError, ValueError, OSError):
        return None


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


def _zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None
