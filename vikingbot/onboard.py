"""First start: config, data folders, the default workspace, the starter skills, the database."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vikingbot.session.types import SessionKey
from vikingbot.skills.discover import user_dir
from vikingbot.skills.starters import install as install_starters

if TYPE_CHECKING:
    from vikingbot.runtime import Runtime

CLI_SESSION = SessionKey("cli", "default", "local")


def ensure_first_start(rt: Runtime) -> dict[str, Path]:
    """Create whatever is missing (idempotent); never overwrite a user's file."""
    paths = rt.paths
    for folder in (paths.data_dir, paths.sessions_dir, paths.workspace_root, paths.logs_dir):
        folder.mkdir(parents=True, exist_ok=True)
    workspace = rt.workspaces.workspace_for(CLI_SESSION)
    install_starters(user_dir(paths.home))
    rt.store  # noqa: B018 - opening applies migrations
    return {
        "config": paths.config_file,
        "data": paths.data_dir,
        "workspace": workspace,
        "database": Path(paths.database_url.removeprefix("sqlite:///"))
        if paths.database_url.startswith("sqlite:///")
        else Path(paths.database_url),
    }
