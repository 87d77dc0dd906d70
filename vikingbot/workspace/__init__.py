"""Workspaces: the folder each session's agent works in, and the template that fills it."""

from vikingbot.workspace.manager import MODES, WorkspaceManager, workspace_name
from vikingbot.workspace.names import safe_name
from vikingbot.workspace.template import fill, template_dir

__all__ = ["MODES", "WorkspaceManager", "fill", "safe_name", "template_dir", "workspace_name"]
