"""Helpers for CLI tests through Typer's runner (the ``cli`` fixture's type, a task added
to a workspace's HEARTBEAT.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

Cli = Callable[..., Result]


def add_task(workspace: Path, line: str) -> None:
    """Add ``line`` under the template's marker of the workspace's HEARTBEAT.md."""
    path = workspace / "HEARTBEAT.md"
    text = path.read_text("utf-8")
    marker = "<!-- Add your periodic tasks below this line -->\n"
    assert marker in text
    path.write_text(text.replace(marker, marker + "\n" + line), "utf-8")
