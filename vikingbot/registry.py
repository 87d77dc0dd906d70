"""The one way to register a thing.

Providers, agent loops, tools, channels and checkers are each found through an
entry-point group. Built-ins are registered in vikingbot's own pyproject.toml
under the same groups a third-party package uses, and nothing is imported until
it is asked for by name.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.metadata import EntryPoint, PackageNotFoundError, entry_points, version
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


def own(kind: str) -> list[str]:
    """The names vikingbot's own distribution registers in ``kind``, in the order its
    pyproject.toml lists them (never one another package or a plug-in adds)."""
    return [
        name
        for name, ep in _entry_points(GROUPS[kind]).items()
        if ep.dist is not None and ep.dist.name == "vikingbot"
    ]


def load(kind: str, name: str) -> Any:
    """Import and return the object registered as ``name`` in ``kind``."""
    eps = _entry_points(GROUPS[kind])
    if name not in eps:
        known = ", ".join(sorted(eps)) or "none"
        raise NotConfiguredError(f"unknown {kind[:-1]} {name!r} (known: {known})")
    try:
        return eps[name].load()
    except ModuleNotFoundError as exc:
        hint = missing_extra(kind, name) or f"{kind[:-1]} {name!r} cannot be imported"
        raise NotConfiguredError(f"{hint}: {exc}") from exc


def load_ready(kind: str, name: str) -> Any:
    """Like :func:`load`, for something about to run: refused, naming the extra to
    install, when the packages of its declared extra are missing (an SDK that is only
    imported when it starts would otherwise fail there)."""
    hint = missing_extra(kind, name)
    if hint:
        raise NotConfiguredError(hint)
    return load(kind, name)


def missing_extra(kind: str, name: str) -> str | None:
    """What to install when ``name`` declares an extra (``"module:Class [extra]"`` in
    its entry point) whose packages are not all installed; None when nothing is missing."""
    ep = _entry_points(GROUPS[kind]).get(name)
    if ep is None or not ep.extras or ep.dist is None:
        return None
    for extra in ep.extras:
        for requirement in ep.dist.requires or []:
            if not _in_extra(requirement, extra):
                continue
            package = re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0]
            try:
                version(package)
            except PackageNotFoundError:
                dist = ep.dist.name
                if dist == "vikingbot":  # the command that keeps the extras installed
                    from vikingbot.extras import hint

                    how = hint(extra)
                else:
                    how = f"pip install '{dist}[{extra}]'"
                return f"{kind[:-1]} {name!r} needs the {extra!r} extra: {how}"
    return None


def _in_extra(requirement: str, extra: str) -> bool:
    marker = requirement.partition(";")[2].replace(" ", "").replace("'", '"')
    return f'extra=="{extra}"' in marker
