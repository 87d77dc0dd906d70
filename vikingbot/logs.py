"""Log sinks. Library code only logs; the CLI decides where logs go."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from loguru import logger

from vikingbot.redact import mask_text

_BASE = "{time:YYYY-MM-DD HH:mm:ss} | {level: <7} | {name}:{line} | "


TRACE = "_trace"  # extra key: the record's traceback as text, secrets masked


def _format(record: Any) -> str:
    """Message first; bound context (workspace=, session=, entry=) after it, when any;
    then the traceback, masked by :func:`_mask` (never loguru's raw ``{exception}``)."""
    shown = [k for k in record["extra"] if not k.startswith("_")]
    extra = " ".join(f"{k}={{extra[{k}]}}" for k in shown)
    tail = f" [{extra}]" if extra else ""
    trace = f"{{extra[{TRACE}]}}" if TRACE in record["extra"] else ""
    return _BASE + "{message}" + tail + "\n" + trace


def _mask(record: Any) -> None:
    """Every log line passes here: secrets in the message and in the exception's text and
    traceback (a provider error echoing its key, a database URL) become ``***``."""
    record["message"] = mask_text(record["message"])
    found = record["exception"]
    if found is not None:
        import traceback

        kind, value, tb = found
        text = "".join(traceback.format_exception(kind, value, tb))
        record["extra"][TRACE] = mask_text(text)
        record["exception"] = None


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
    logger.add(sys.stderr, level="WARNING", format=_short)


def _short(record: Any) -> str:
    """``LEVEL: message``, then the masked traceback when there is one."""
    trace = f"{{extra[{TRACE}]}}" if TRACE in record["extra"] else ""
    return "{level}: {message}\n" + trace
