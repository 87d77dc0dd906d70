"""Which workspace folder a session uses, and creating it on first use.

Sandbox modes (``bot.sandbox.mode``):

- ``shared`` (default): every session uses ``<root>/shared``;
- ``per-channel``: one folder per channel, named from ``type:channel_id``;
- ``per-session``: one folder per session, named from the full key.

``vikingbot doctor --live``'s connection test is nobody's chat: it uses the shared
folder in every mode (no folder of its own appears among the user's).

Folder names come from :func:`vikingbot.workspace.names.safe_name`, and every
path is checked to be a direct child of the root before it is used, so no key
can point outside the workspace root.
"""

from __future__ import annotations

import os
from pathlib import Path

from vikingbot.errors import WorkspaceError
from vikingbot.session.types import DOCTOR, SessionKey
from vikingbot.workspace import template as _template
from vikingbot.workspace.names import safe_name

MODES = ("shared", "per-channel", "per-session")
SHARED_NAME = "shared"


def workspace_name(key: SessionKey, mode: str) -> str:
    """The folder name (one path component) for ``key`` under ``mode``."""
    if mode == "shared" or key.type == DOCTOR:
        return SHARED_NAME
    if mode == "per-channel":
        return safe_name(f"{key.type}:{key.channel_id}")
    if mode == "per-session":
        return safe_name(str(key))
    raise WorkspaceError(f"unknown sandbox mode {mode!r}: expected one of {', '.join(MODES)}")


def checked_name(key: SessionKey, mode: str) -> str:
    """The workspace folder's name for ``key``: pure, no file system access.

    For code that only needs to know which workspace a session belongs to (the
    heartbeat groups thousands of sessions); :meth:`WorkspaceManager.path_for`
    also checks the folder on disk before anything uses it.
    """
    name = workspace_name(key, mode)
    if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise WorkspaceError(f"refusing workspace name {name!r}: not a single folder name")
    return name


class WorkspaceManager:
    """Resolves sessions to workspace folders under ``root``."""

    def __init__(self, root: Path, mode: str = "shared", template_dir: Path | None = None) -> None:
        if mode not in MODES:
            raise WorkspaceError(
                f"unknown sandbox mode {mode!r}: expected one of {', '.join(MODES)}"
            )
        self.root = Path(root)
        self.mode = mode
        self._template_dir = template_dir
        self._ready: set[Path] = set()
        self._abs_root = Path(os.path.abspath(self.root))  # resolved once, not per session
        self._resolved_root: Path | None = None

    def _inside(self, name: str) -> Path:
        if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise WorkspaceError(f"refusing workspace name {name!r}: not a single folder name")
        root = self._abs_root
        path = root / name
        if Path(os.path.abspath(path)).parent != root:
            raise WorkspaceError(f"refusing workspace {path}: outside the root {root}")
        if path.exists() and not path.is_symlink():
            # a folder the user symlinked on purpose may live elsewhere; ours may not
            if self._resolved_root is None:
                self._resolved_root = root.resolve()
            resolved_root = self._resolved_root
            if path.resolve().parent != resolved_root:
                raise WorkspaceError(f"refusing workspace {path}: resolves outside {resolved_root}")
        return path

    def name_for(self, key: SessionKey) -> str:
        """The workspace folder's name for ``key`` (pure; see :func:`checked_name`)."""
        return checked_name(key, self.mode)

    def named(self, name: str) -> Path:
        """The workspace folder called ``name`` (one folder name under the root, checked)."""
        return self._inside(name)

    def path_for(self, key: SessionKey) -> Path:
        """The workspace folder for ``key`` without creating anything."""
        return self._inside(workspace_name(key, self.mode))

    def workspace_for(self, key: SessionKey) -> Path:
        """The workspace folder for ``key``, created and filled from the template.

        The first time this manager hands out a folder, template files that are
        missing are created; files that exist are never changed.
        """
        path = self.path_for(key)
        if path not in self._ready:
            self.ensure(path)
        return path

    def ensure(self, path: Path) -> list[Path]:
        """Create ``path`` (a folder under the root) and fill in missing template files."""
        if Path(os.path.abspath(path)).parent != Path(os.path.abspath(self.root)):
            raise WorkspaceError(f"refusing workspace {path}: not a folder directly in {self.root}")
        path = self._inside(path.name)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkspaceError(f"cannot create workspace {path}: {exc}") from exc
        created = _template.fill(path, self._template_dir)
        self._ready.add(path)
        return created

    def list_workspaces(self) -> list[Path]:
        """Workspace folders that exist under the root (hidden folders left out), sorted."""
        try:
            entries = sorted(self.root.iterdir())
        except FileNotFoundError:
            return []
        return [p for p in entries if p.is_dir() and not p.name.startswith(".")]
