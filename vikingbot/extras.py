"""What to type to add an optional extra without losing the ones installed (issue 42).

``uv sync --extra notify`` in a clone removes every extra it does not name (uv
syncs exactly), and ``uv tool install -e .`` installs none: a hint naming only the
missing extra undoes what the user added a minute earlier. :func:`install_command`
names the extras installed now plus the one wanted, in the form that fits how this
vikingbot was installed: a clone's ``.venv`` (``uv sync --extra a --extra b``, or
``--all-extras`` when that is all of them), a ``uv tool`` install (``uv tool
install --reinstall -e '<clone>[a,b]'``), or pip (``pip install 'vikingbot[a,b]'``).

:func:`install_command` is pure (given the extras and the install); :func:`here`
reads them from this environment's metadata.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from importlib.metadata import Distribution, PackageNotFoundError, distribution, version
from pathlib import Path
from typing import Literal

DIST = "vikingbot"
Kind = Literal["clone", "tool", "pip"]


@dataclass(frozen=True)
class Install:
    """How vikingbot is installed here: ``kind``, the clone's folder (an editable
    install), every extra it declares and those whose packages are all present."""

    kind: Kind
    source: Path | None
    declared: tuple[str, ...]
    installed: tuple[str, ...]


def install_command(install: Install, *wanted: str) -> str:
    """The command that installs ``wanted`` and keeps every extra installed now."""
    extras = sorted({*install.installed, *wanted})
    if install.kind == "clone":
        if set(extras) >= set(install.declared):
            return "uv sync --all-extras"
        return "uv sync " + " ".join(f"--extra {e}" for e in extras)
    spec = f"[{','.join(extras)}]" if extras else ""
    if install.kind == "tool":
        where = str(install.source) if install.source is not None else "."
        return f"uv tool install --reinstall -e '{where}{spec}'"
    return f"pip install '{DIST}{spec}'"


def here() -> Install:
    """This environment's vikingbot: how it was installed and which extras it has."""
    try:
        dist = distribution(DIST)
    except PackageNotFoundError:
        return Install("pip", None, (), ())
    names = dist.metadata.get_all("Provides-Extra") or ()
    declared = tuple(e for e in names if _packages(dist, e))
    installed = tuple(e for e in declared if _complete(dist, e))
    source = _editable_source(dist)
    prefix = Path(sys.prefix)
    if (prefix / "uv-receipt.toml").exists():
        kind: Kind = "tool"
    elif source is not None and prefix.parent == source:
        kind = "clone"  # <clone>/.venv, made by `uv sync` / `uv run`
    else:
        kind = "pip"
    return Install(kind, source, declared, installed)


def hint(*wanted: str) -> str:
    """:func:`install_command` for this environment."""
    return install_command(here(), *wanted)


def _packages(dist: Distribution, extra: str) -> list[str]:
    """The packages ``extra`` adds (none for an extra kept as an alias of the default
    install, such as ``mcp`` and ``notify``)."""
    found = []
    for requirement in dist.requires or []:
        marker = requirement.partition(";")[2].replace(" ", "").replace("'", '"')
        if f'extra=="{extra}"' in marker:
            found.append(re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0])
    return found


def _complete(dist: Distribution, extra: str) -> bool:
    """Whether every package of ``extra`` is installed."""
    for package in _packages(dist, extra):
        try:
            version(package)
        except PackageNotFoundError:
            return False
    return True


def _editable_source(dist: Distribution) -> Path | None:
    """The folder of an editable install (``direct_url.json``), else None."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    url = data.get("url") if isinstance(data, dict) else None
    editable = isinstance(data, dict) and (data.get("dir_info") or {}).get("editable")
    if not editable or not isinstance(url, str) or not url.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(url).path))
