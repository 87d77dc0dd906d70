"""Which timezone the heartbeat lives in: config, else ``TZ``, else the system's, else UTC."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vikingbot.errors import ConfigError

UTC_ZONE = ZoneInfo("UTC")


def resolve_timezone(
    name: str | None,
    *,
    environ: Mapping[str, str] | None = None,
    localtime: Path = Path("/etc/localtime"),
) -> ZoneInfo:
    """The heartbeat timezone.

    ``name`` (``bot.heartbeat.timezone``) wins and must be a valid IANA name.
    Without it: the ``TZ`` environment variable if it names an IANA zone
    (``Europe/Berlin``, ``:Europe/Berlin`` or a path into a zoneinfo
    directory), else the zone ``/etc/localtime``
    links to, else UTC.
    """
    if name:
        zone = _zone(name)
        if zone is None:
            raise ConfigError(
                f"bot.heartbeat.timezone: unknown IANA timezone {name!r} (e.g. Europe/Berlin, UTC)"
            )
        return zone
    env = os.environ if environ is None else environ
    tz_env = env.get("TZ", "").strip().lstrip(":")
    if tz_env.startswith("/"):
        tz_env = _after_zoneinfo(tz_env) or ""
    if tz_env:
        zone = _zone(tz_env)
        if zone is not None:
            return zone
    linked = _linked_zone_name(localtime)
    if linked:
        zone = _zone(linked)
        if zone is not None:
            return zone
    return UTC_ZONE


def _zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _linked_zone_name(localtime: Path) -> str | None:
    """``/etc/localtime -> /usr/share/zoneinfo/Europe/Berlin`` gives ``Europe/Berlin``."""
    try:
        target = os.readlink(localtime)
    except OSError:
        return None
    return _after_zoneinfo(target)


def _after_zoneinfo(path: str) -> str | None:
    marker = "zoneinfo/"
    idx = path.rfind(marker)
    if idx < 0:
        return None
    return path[idx + len(marker) :] or None
