"""`vikingbot gateway`: run everything."""

from __future__ import annotations

from typing import Annotated

import typer

from vikingbot.cli.common import fail, get_config, state


def register(app: typer.Typer) -> None:
    @app.command("gateway")
    def gateway(
        ctx: typer.Context,
        host: Annotated[
            str | None, typer.Option(help="Bind address (default bot.gateway.host).")
        ] = None,
        port: Annotated[int | None, typer.Option(help="Port (default bot.gateway.port).")] = None,
        verbose: Annotated[
            bool,
            typer.Option(
                "--verbose",
                "-v",
                help="All logs on the console (else: warnings; all in the log file).",
            ),
        ] = False,
    ) -> None:
        """Start the gateway: heartbeat, cron, channels, housekeeping and /health."""
        import asyncio

        from vikingbot.errors import VikingbotError
        from vikingbot.gateway.compose import build_home
        from vikingbot.gateway.supervisor import Gateway
        from vikingbot.logs import setup_logging
        from vikingbot.onboard import ensure_first_start
        from vikingbot.private import keep_private

        config, paths = get_config(ctx)
        keep_private(paths.data_dir)  # state.db, logs, everything written: 0600 / 0700
        rt = build_home(config, paths)

        def say(line: str) -> None:
            typer.echo(line, err=False)

        gw = Gateway(rt, host=host, port=port, say=say)
        try:
            # before anything else: a second gateway on this home says who holds it
            gw.check_bind()
            gw.take_home()
            # the console shows the start lines (✓/✗) and warnings; the rest is in the file
            setup_logging(
                verbose=verbose or state(ctx).verbose, logs_dir=paths.logs_dir, quiet=True
            )
            ensure_first_start(rt)
            code = asyncio.run(gw.run())
        except VikingbotError as exc:
            fail(str(exc))
        _exit_now(code)


def _exit_now(code: int) -> None:
    """Leave without the interpreter's finalisation.

    Everything is closed and flushed by now (store, channels, lock, logs). After a
    turn was cancelled, the final garbage collection of a big object graph took
    seconds, which broke "stops within 3 s" for no benefit.
    """
    import contextlib
    import os
    import sys

    from loguru import logger

    logger.remove()  # waits for queued log lines to be written
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
