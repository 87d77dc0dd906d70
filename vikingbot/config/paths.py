"""Where the config file and the data live (no pydantic here: the fast commands use it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ENV_PREFIX = "VIKINGBOT_"


@dataclass(frozen=True)
class Paths:
    home: Path
    config_file: Path
    data_dir: Path
    database_url: str

    @property
    def workspace_root(self) -> Path:
        return self.data_dir / "workspace"

    @property
    def sessions_dir(self) -> Path:
        return self.data_dir / "sessions"

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"


def home_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    raw = env.get("VIKINGBOT_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".vikingbot"


def config_path(
    explicit: Path | str | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    env = os.environ if environ is None else environ
    if explicit:
        return Path(explicit).expanduser()
    if env.get("VIKINGBOT_CONFIG"):
        return Path(env["VIKINGBOT_CONFIG"]).expanduser()
    return home_dir(env) / "config.json"
