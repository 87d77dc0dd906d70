"""Log sinks. Library code only logs; the CLI decides where logs go."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from loguru import logger

from vikingbot.redact import mask_text

_BASE = "{time:YYYY-MM-DD HH:mm:ss} | {level: <7} | {name}:{line} | "


def _format(record: Any) -> str:
    """Message first; bound context (workspace=, session=, entry=) after it, when any."""
    extra = " ".join(f"{k}={{extra[{k}]}}" for k in record["extra"])
    tail = f" [{extra}]" if extra else ""
    return _BASE + "{message}" + tail + "\n{exception}"


def _mask(record: Any) -> None:
    """Every log line passes here: URL passwords and secret query parameters become ``***``."""
    record["message"] = mask_text(record["message"])


def setup_logging(
    *,
    verbose: bool = False,
    logs_dir: Path | None = None,
    console: bool = True,
    log_name: str = "vikingbot.log",
) -> None:
    """Console (INFO, or DEBUG with ``verbose``) and a rotating file ``log_name`` under
    ``logs_dir``."""
    logger.remove()
    logger.configure(patcher=_mask)
    if console:
        logger.add(
            sys.stderr,
            level="DEBUG" if verbose else "INFO",
            format=_format,
            backtrace=False,
            diagnose=False,
        )
    if logs_dir is not None:
        logs_dir.mkdir(parents=True, exist_ok=True)
        logger.add(
            logs_dir / log_name,
            level="DEBUG",
            format=_format,
            rotation="10 MB",
            retention=5,
            enqueue=True,
            diagnose=False,  # never print variable values (tokens) in tracebacks
            encoding="utf-8",
        )


def quiet() -> None:
    """No console logs (default for one-shot CLI commands; errors are printed by the CLI)."""
    logger.remove()
    logger.configure(patcher=_mask)
    logger.add(sys.stderr, level="WARNING", format="{level}: {message}")
