"""`vikingbot status` without validating the config again when nothing changed.

Validating the config needs pydantic, whose import is most of the command's
start-up time. The summary ``status`` prints is therefore kept in
``<home>/run/status-view.json`` together with a digest of everything it was
derived from: the config file's bytes, both ``.env`` files' bytes, every
``VIKINGBOT_*`` variable, the value of every ``${VAR}`` the file uses, the
package version and the schema module's identity. Beside it the names of the
variables the agent's readiness looked up (``OPENAI_API_KEY``, ``PATH`` for an
ACP program) and a digest of their values: a key exported in this shell is
seen. When both digests still match, ``status`` prints the stored summary (plus
the live session and workspace counts); anything different and it validates as
before and stores the new summary. A missing, unreadable or foreign cache file just means the
slow path. This module imports neither pydantic nor the config loader.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from vikingbot.config.paths import ENV_PREFIX

CACHE_NAME = "status-view.json"
# config.schema.BUILTIN_CHANNELS (not imported here: it would bring pydantic)
_BUILTIN_CHANNEL_MODULES = ("cli", "webhook", "slack", "telegram")
_VAR = re.compile(rb"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def inputs_digest(config_file: Path, home: Path, environ: Mapping[str, str]) -> str | None:
    """A digest of every input of the config, or ``None`` when there is no config file."""
    from vikingbot import __version__

    try:
        text = config_file.read_bytes()
    except OSError:
        return None
    h = hashlib.sha256()
    for part in (__version__.encode(), str(config_file).encode(), os.getcwd().encode(), text):
        h.update(len(part).to_bytes(8, "big") + part)
    # the schema, and the built-in channels' modules that hold their sections' settings
    package = Path(__file__).parent.parent
    models = [Path(__file__).with_name("schema.py")]
    models += [package / "channels" / f"{name}.py" for name in _BUILTIN_CHANNEL_MODULES]
    for model in models:
        try:
            st = os.stat(model)
            h.update(f"{model.name}:{st.st_mtime_ns}:{st.st_size}".encode())
        except OSError:
            pass
    for dotenv in (home / ".env", Path.cwd() / ".env"):
        try:
            data = dotenv.read_bytes()
        except OSError:
            data = b"\0missing"
        h.update(len(data).to_bytes(8, "big") + data)
    env = {k: v for k, v in environ.items() if k.upper().startswith(ENV_PREFIX)}
    for name in sorted({m.decode() for m in _VAR.findall(text)}):
        env[f"${name}"] = environ.get(name, "\0unset")
    h.update(json.dumps(sorted(env.items())).encode())
    return h.hexdigest()


def reads_digest(names: Iterable[str], environ: Mapping[str, str]) -> str:
    """A digest of the values of ``names`` (never the values themselves: keys)."""
    values = [[name, environ.get(name)] for name in sorted(set(names))]
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()


def load(home: Path, digest: str, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The stored summary if it was made from exactly these inputs."""
    try:
        data = json.loads((home / "run" / CACHE_NAME).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("digest") != digest:
        return None
    reads = data.get("reads")
    if not isinstance(reads, list) or not all(isinstance(n, str) for n in reads):
        return None
    if data.get("reads_digest") != reads_digest(reads, environ):
        return None
    view = data.get("view")
    return view if isinstance(view, dict) else None


def save(
    home: Path, digest: str, view: dict[str, Any], reads: Iterable[str], environ: Mapping[str, str]
) -> None:
    """Store the summary and the variables it read (``reads``: names looked up in
    ``environ``); best effort: a read-only home just stays on the slow path."""
    folder = home / "run"
    tmp = folder / f".{CACHE_NAME}.{os.getpid()}.tmp"
    names = sorted(set(reads))
    record = {
        "digest": digest,
        "view": view,
        "reads": names,
        "reads_digest": reads_digest(names, environ),
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, folder / CACHE_NAME)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


class Reads(Mapping[str, str]):
    """An environment that remembers which variables were looked up (``names``)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self.names: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.names.add(name)
        return self._environ[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._environ)

    def __len__(self) -> int:
        return len(self._environ)
