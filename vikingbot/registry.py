"""The one way to register a thing.

Providers, agent loops, tools, channels and checkers are each found through an
entry-point group. Built-ins are registered in vikingbot's own pyproject.toml
under the same groups a third-party package uses, and nothing is imported until
it is asked for by name.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from vikingbot.errors import NotConfiguredError

GROUPS = {
    "providers": "vikingbot.providers",
    "loops": "vikingbot.loops",
    "tools": "vikingbot.tools",
    "channels": "vikingbot.channels",
    "checkers": "vikingbot.checkers",
}


@cache
def _entry_points(group: str) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group):
        found.setdefault(ep.name, ep)
    return found


def names(kind: str) -> list[str]:
    """Registered names of one kind (e.g. ``names("checkers")``), sorted."""
    return sorted(_entry_points(GROUPS[kind]))


def load(kind: str, name: str) -> Any:
    """Import and return the object registered as ``name`` in ``kind``."""
    eps = _entry_points(GROUPS[kind])
    if name not in eps:
        known = ", ".join(sorted(eps)) or "none"
        raise NotConfiguredError(f"unknown {kind[:-1]} {name!r} (known: {known})")
    return eps[name].load()
