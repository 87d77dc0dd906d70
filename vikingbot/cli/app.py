"""The `vikingbot` command: one Typer sub-app per noun.

Only Typer and the standard library are imported at start; every command
imports what it needs when it runs, so `vikingbot --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vikingbot import __version__
from vikingbot.cli import common

app = typer.Typer(
    name="vikingbot",
    help="A personal AI agent bot with a heartbeat.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"vikingbot {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="Config file (default: $VIKINGBOT_CONFIG or <home>/config.json).",
            envvar="VIKINGBOT_CONFIG",
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Debug logging on the console.")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    ctx.obj = common.CliState(config_path=config, verbose=verbose)
    if ctx.invoked_subcommand and not ctx.resilient_parsing:
        # One-shot commands print results, not the library's log: warnings and errors
        # only (DEBUG with --verbose), secrets masked. loguru is imported by now, so its
        # LOGURU_LEVEL would come too late (a DEBUG line before `inbox`, migrations'
        # INFO lines between onboard's questions); commands that run long (gateway) or
        # report progress (onboard) set up their own sinks.
        from vikingbot.logs import setup_logging

        setup_logging(verbose=verbose, quiet=not verbose)


def _register() -> None:
    from vikingbot.cli import (
        api_cmd,
        channels_cmd,
        chat_cmd,
        config_cmd,
        cron_cmd,
        dashboard_cmd,
        doctor_cmd,
        gateway_cmd,
        heartbeat_cmd,
        inbox_cmd,
        mcp_cmd,
        memory_cmd,
        onboard_cmd,
        service_cmd,
        sessions_cmd,
        skills_cmd,
        top_cmd,
    )

    top_cmd.register(app)
    gateway_cmd.register(app)
    chat_cmd.register(app)
    dashboard_cmd.register(app)
    doctor_cmd.register(app)
    onboard_cmd.register(app)
    app.add_typer(config_cmd.app, name="config", help="Read and change the config file.")
    app.add_typer(sessions_cmd.app, name="sessions", help="List and manage chat sessions.")
    app.add_typer(heartbeat_cmd.app, name="heartbeat", help="Plan, run and inspect the heartbeat.")
    app.add_typer(cron_cmd.app, name="cron", help="Scheduled agent jobs.")
    app.add_typer(channels_cmd.app, name="channels", help="Chat platform connections.")
    app.add_typer(service_cmd.app, name="service", help="Run the gateway as a user service.")
    app.add_typer(skills_cmd.app, name="skills", help="SKILL.md procedures the agent loads.")
    app.add_typer(mcp_cmd.app, name="mcp", help="MCP servers the agent uses as tools.")
    app.add_typer(
        inbox_cmd.app, name="inbox", help="Results delivered to the local dashboard inbox."
    )
    app.add_typer(memory_cmd.app, name="memory", help="What the bot remembers, and undo.")
    app.add_typer(api_cmd.app, name="api", help="Client tokens for the OpenAI API and MCP.")
    from vikingbot.cli import pair_cmd

    app.add_typer(pair_cmd.app, name="pair", help="Let a new person in by their pairing code.")


_register()


def main() -> None:
    import sys

    from vikingbot.cli.top_cmd import fast_status

    if fast_status(sys.argv[1:]):  # the cached `status` (docs/architecture.md)
        return
    try:
        app(standalone_mode=True)
    except Exception as exc:  # the CLI's error printer for whatever no command caught
        _report(exc)
        raise SystemExit(1) from None


def _report(exc: Exception) -> None:
    """A vikingbot error (or a full or read-only disk) as one line, anything else as its
    traceback; secrets masked."""
    import sys
    import traceback

    from vikingbot.errors import VikingbotError
    from vikingbot.fsutil import disk_path, disk_problem
    from vikingbot.redact import mask_text

    if isinstance(exc, VikingbotError):
        sys.stderr.write(f"Error: {mask_text(str(exc))}\n")
        return
    problem = disk_problem(exc)
    if problem is not None:  # a full or read-only home: one line naming the path and the cause
        where = disk_path(exc) or "the vikingbot home"
        sys.stderr.write(f"Error: cannot write {where}: {problem}\n")
        return
    sys.stderr.write(mask_text("".join(traceback.format_exception(exc))))
