"""What the config says and the running gateway does not (issue 42), from its ``/health``.

Pure: the config as the files say, and the gateway's answer. ``doctor`` and
``channels status`` print each line as "in the config, not running".
"""

from __future__ import annotations

from typing import Any, NamedTuple

from vikingbot.config.schema import Config
from vikingbot.delivery.owner import channel_sections

NOT_RUNNING = "in the config, not running"


class Drift(NamedTuple):
    """One thing the config has that the gateway does not run: ``what`` and why."""

    what: str
    why: str


def drift(config: Config, health: dict[str, Any]) -> list[Drift]:
    """Enabled channels the gateway does not run, and keys that wait for a restart."""
    from vikingbot.gateway.applying import RESTART_HINT

    found: list[Drift] = []
    rows = {r.get("name"): r for r in health.get("channels") or [] if isinstance(r, dict)}
    for name, section in channel_sections(config).items():
        row = rows.get(name) or {}
        if not section.enabled or name == "cli" or row.get("running"):
            continue
        why = row.get("last_error") or (
            "the gateway has not applied it yet" if not row.get("enabled") else "not started"
        )
        found.append(Drift(f"channel {name}", str(why)))
    raw = health.get("config")
    cfg: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if cfg.get("error"):
        found.append(Drift("config", f"the last change was not applied: {cfg['error']}"))
    for key in cfg.get("restart_needed") or []:
        found.append(Drift(str(key), RESTART_HINT))
    return found
