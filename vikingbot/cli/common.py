"""What every command shares: the loaded config, JSON output, clean failures."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from vikingbot.config.loader import Paths
    from vikingbot.config.schema import Config


@dataclass
class CliState:
    config_path: Path | None = None
    verbose: bool = False


def state(ctx: typer.Context) -> CliState:
    root = ctx.find_root()
    obj = root.obj
    return obj if isinstance(obj, CliState) else CliState()


def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print an error to stderr, secrets masked, and exit (1: bad input or domain error,
    2: usage)."""
    from rich.markup import escape

    from vikingbot.redact import mask_text

    err_console().print(
        f"[bold red]Error:[/] {escape(mask_text(message))}",
        highlight=False,
        markup=True,
        soft_wrap=True,
    )
    raise typer.Exit(code)


def get_config(ctx: typer.Context, *, create: bool = True) -> tuple[Config, Paths]:
    """Load the config (creating it with defaults when missing); exit 1 on a bad one."""
    from vikingbot.config.loader import load_config
    from vikingbot.errors import ConfigError

    st = state(ctx)
    try:
        return load_config(st.config_path, create=create)
    except ConfigError as exc:
        fail(str(exc))


def chat_workspace(ctx: typer.Context, workspace: str | None) -> Path:
    """The folder of the workspace named ``workspace`` (``--workspace``), else of the
    terminal chat's; a name that is no workspace exits 2 with the reason."""
    return workspace_in(*get_config(ctx), workspace)


def workspace_in(config: Config, paths: Paths, workspace: str | None) -> Path:
    """:func:`chat_workspace` for a config already loaded."""
    from vikingbot.errors import VikingbotError
    from vikingbot.onboard import CLI_SESSION
    from vikingbot.workspace.manager import WorkspaceManager

    manager = WorkspaceManager(paths.workspace_root, config.bot.sandbox.mode)
    try:
        return manager.path_for(CLI_SESSION) if workspace is None else manager.named(workspace)
    except VikingbotError as exc:
        fail(str(exc), code=2)


def _default(obj: Any) -> Any:
    if isinstance(obj, datetime | date):
        return obj.isoformat()
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "get_secret_value"):
        return "***"
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def print_json(data: Any) -> None:
    """Write data as JSON to stdout (the contract scripts read)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=_default) + "\n")
    sys.stdout.flush()
