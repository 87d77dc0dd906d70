"""One line for the user each time a model SDK retries a request.

The ``openai`` and ``anthropic`` SDKs retry 408/409/429/5xx answers and dropped
connections themselves (``bot.providers.<name>.max_retries`` times, with
backoff that honours ``Retry-After``). They say so only on their own loggers
(``openai._base_client``, ``anthropic._base_client``): a DEBUG record with the
reason ("Retrying due to status code 503", "Encountered Exception") and then an
INFO record "Retrying request ... in <s> seconds". :func:`reporting` listens on
those loggers and turns each pair into one line, e.g. ``the model API answered
503; retrying in 0.8 s (retry 1 of 2)``, for the code running inside the block:
the reporter is a context variable, so in the gateway each chat turn hears only
its own retries (tasks started inside the block inherit it). The SDKs keep
doing the retrying; nothing about it changes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

SDK_LOGGERS = ("openai._base_client", "anthropic._base_client")

Report = Callable[[str], None]

_report: ContextVar[Report | None] = ContextVar("sdk_retry_report", default=None)
_reason: ContextVar[str | None] = ContextVar("sdk_retry_reason", default=None)

_STATUS = re.compile(r"status code (\d{3})")
_DELAY = re.compile(r" in (\d+(?:\.\d+)?) seconds")
_COUNT = re.compile(r"\(retry (\d+) of (\d+)\)")


def retry_line(reason: str | None, message: str) -> str:
    """The user's line for an SDK's "Retrying request ..." message. Pure, total."""
    why = "the model API did not answer"
    if reason:
        status = _STATUS.search(reason[:500])
        if status:
            why = f"the model API answered {status.group(1)}"
        elif "Timeout" in reason:
            why = "the model API timed out"
        elif "Exception" in reason:
            why = "the model API could not be reached"
    line = f"{why}; retrying"
    delay = _DELAY.search(message[:500])
    if delay:
        line += f" in {float(delay.group(1)):.1f} s"
    count = _COUNT.search(message[:500])
    if count:
        line += f" (retry {count.group(1)} of {count.group(2)})"
    return line


class _Listener(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        report = _report.get()
        template = record.msg
        if report is None or not isinstance(template, str):
            return
        if not template.startswith(("Retrying", "Encountered", "Sending HTTP Request")):
            return  # e.g. "Request options: ..." (the whole conversation): never formatted
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break the turn
            return
        if message.startswith("Retrying request"):
            reason = _reason.get()
            _reason.set(None)
            try:
                report(retry_line(reason, message))
            except Exception:  # nor a reporter that fails
                return
        elif message.startswith(("Retrying due to", "Retrying as header", "Encountered")):
            _reason.set(message)
        elif message.startswith("Sending HTTP Request"):
            _reason.set(None)


_listener = _Listener(logging.DEBUG)


def install() -> None:
    """Listen on the SDK loggers (once per process; cheap: a few records per request)."""
    for name in SDK_LOGGERS:
        log = logging.getLogger(name)
        if _listener not in log.handlers:
            log.addHandler(_listener)
        if log.getEffectiveLevel() > logging.DEBUG:
            log.setLevel(logging.DEBUG)


@contextmanager
def reporting(report: Report) -> Iterator[None]:
    """Call ``report(line)`` for each retry the model SDKs make inside the block (and in
    tasks started inside it)."""
    install()
    token = _report.set(report)
    try:
        yield
    finally:
        _report.reset(token)
