"""Where a tool may touch the file system.

With ``bot.tools.exec.restrict_to_workspace`` (the default) every path a tool
is given is resolved (``..`` and symlinks followed) and refused unless it lands
inside the workspace. Without it, relative paths still start at the workspace.
"""

from __future__ import annotations

import os
from pathlib import Path

from vikingbot.errors import ToolError


def resolve_in(workspace: Path, raw: str, *, restrict: bool) -> Path:
    """Resolve ``raw`` against ``workspace``; ``ToolError`` if it escapes a restricted one."""
    if not isinstance(raw, str) or not raw.strip():
        raise ToolError("a path is required")
    if "\x00" in raw:
        raise ToolError("a path may not contain NUL bytes")
    path = Path(raw if restrict else os.path.expanduser(raw))
    if not path.is_absolute():
        path = workspace / path
    resolved = path.resolve()
    if restrict and not is_inside(workspace, resolved):
        raise ToolError(
            f"{raw!r} is outside the workspace {workspace.resolve()}; tools are confined to it "
            "(bot.tools.exec.restrict_to_workspace)"
        )
    return resolved


def is_inside(workspace: Path, resolved: Path) -> bool:
    root = workspace.resolve()
    return resolved == root or resolved.is_relative_to(root)


def shown(workspace: Path, path: Path) -> str:
    """``path`` as the model should see it: relative to the workspace when inside."""
    root = workspace.resolve()
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return "." if str(rel) == "." else rel.as_posix()
