"""Log sinks. Library code only logs; the CLI decides where logs go."""

from __future__ import annotations

import sys
from pathlib import Path

from loguru import logger

_FORMAT = "{time:YYYY-MM-DD HH:mm:ss} | {level: <7} | {name}:{line} | {message} {extra}"


def setup_logging(
    *, verbose: bool = False, logs_dir: Path | None = None, console: bool = True
) -> None:
    """Console (INFO, or DEBUG with ``verbose``) and a rotating file under ``logs_dir``."""
    logger.remove()
    if console:
        logger.add(
            sys.stderr, level="DEBUG" if verbose else "INFO", format=_FORMAT, backtrace=False
        )
    if logs_dir is not None:
        logs_dir.mkdir(parents=True, exist_ok=True)
        logger.add(
            logs_dir / "vikingbot.log",
            level="DEBUG",
            format=_FORMAT,
            rotation="10 MB",
            retention=5,
            enqueue=True,
            encoding="utf-8",
        )


def quiet() -> None:
    """No console logs (default for one-shot CLI commands; errors are printed by the CLI)."""
    logger.remove()
    logger.add(sys.stderr, level="WARNING", format="{level}: {message}")
