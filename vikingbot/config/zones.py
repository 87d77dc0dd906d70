"""The one default timezone: ``bot.heartbeat.timezone``, else the machine's (tzlocal), else UTC.

The heartbeat, its active hours and every cron job added without a timezone
(``cron add``, the agent's cron tool, the dashboard's form) use it, so one
answer to "which clock?" holds everywhere (issue 16).
"""

from __future__ import annotations

import warnings
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


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


def known_zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def default_zone_name(configured: str | None) -> str:
    """``configured`` (``bot.heartbeat.timezone``) when set, else the machine's zone when
    this Python knows it, else ``"UTC"``."""
    if configured:
        return configured
    found = local_zone_name()
    return found if found and known_zone(found) is not None else "UTC"
