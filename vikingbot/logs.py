"""Log sinks. Library code only logs; the CLI decides where logs go."""

from __future__ import annotations

import logging
import logging.handlers
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
    quiet: bool = False,
) -> None:
    """Console (INFO, or DEBUG with ``verbose``; ``quiet``: warnings and errors only,
    the rest in the file) and a rotating file ``log_name`` under ``logs_dir``."""
    logger.remove()
    logger.configure(patcher=_mask)
    if console:
        logger.add(
            _stderr,
            colorize=_tty(),
            level="DEBUG" if verbose else ("WARNING" if quiet else "INFO"),
            format=_format,
            backtrace=False,
            diagnose=False,
        )
    if logs_dir is not None:
        try:
            logs_dir.mkdir(parents=True, exist_ok=True)
            sink: Any = LogFile(logs_dir / log_name, echo=not console)
        except OSError as exc:
            _degraded(logs_dir / log_name, exc)
            return
        logger.add(
            sink,
            level="DEBUG",
            format=_format,
            enqueue=True,
            diagnose=False,  # never print variable values (tokens) in tracebacks
        )


def _degraded(path: Path, exc: BaseException) -> None:
    from vikingbot.fsutil import disk_problem

    why = disk_problem(exc) or getattr(exc, "strerror", None) or str(exc)
    sys.stderr.write(
        f"vikingbot: cannot write the log file {path}: {why}; logging to stderr only\n"
    )


class LogFile(logging.handlers.RotatingFileHandler):
    """The log file (10 MB, 5 kept). When it cannot be written (a full or read-only disk) it
    says so once on stderr, in one line, and logs to stderr from then on (``echo``) or
    only to the console sink already there, never a traceback per line."""

    def __init__(self, path: Path, *, echo: bool) -> None:
        super().__init__(path, maxBytes=10 * 1024 * 1024, backupCount=5, encoding="utf-8")
        self.echo = echo
        self.failed = False

    def emit(self, record: logging.LogRecord) -> None:
        record.msg = str(record.msg).rstrip("\n")  # loguru's formatted line; the handler ends it
        if self.failed:
            if self.echo:
                sys.stderr.write(record.getMessage() + "\n")
            return
        super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        if self.failed:
            return
        self.failed = True
        _degraded(Path(self.baseFilename), sys.exc_info()[1] or OSError("unknown error"))
        self.emit(record)


def quiet() -> None:
    """No console logs (default for one-shot CLI commands; errors are printed by the CLI)."""
    logger.remove()
    logger.configure(patcher=_mask)
    logger.add(_stderr, colorize=_tty(), level="WARNING", format=_short)


def _stderr(message: str) -> None:
    """The console sink: the process's stderr as it is at each write, not the stream it
    was when the sink was added (a command run in-process, as the tests run the CLI,
    swaps stderr for a buffer and closes it after; a sink holding that buffer would
    print "Logging error ... I/O operation on closed file" for every later line)."""
    sys.stderr.write(message)


def _tty() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def _short(record: Any) -> str:
    """``LEVEL: message``, then the masked traceback when there is one."""
    trace = f"{{extra[{TRACE}]}}" if TRACE in record["extra"] else ""
    return "{level}: {message}\n" + trace
