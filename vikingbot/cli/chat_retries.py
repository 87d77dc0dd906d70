"""One line in the chat each time the model SDK retries a request.

The ``openai`` and ``anthropic`` SDKs retry 408/409/429/5xx answers and dropped
connections themselves (``bot.providers.<name>.max_retries`` times, with
backoff). They say so only on their own loggers (``openai._base_client`` and
``anthropic._base_client``): a DEBUG record with the reason ("Retrying due to
status code 503", "Encountered Exception") and then an INFO record "Retrying
request ... in <s> seconds". While the chat runs, :func:`report_sdk_retries`
listens on those loggers and turns each pair into one line for the user, e.g.
``the model API answered 503; retrying in 0.8 s (retry 1 of 2)``. The SDKs keep
doing the retrying; nothing about them changes. Outside the chat the loggers are
left as they were.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SDK_LOGGERS = ("openai._base_client", "anthropic._base_client")

_STATUS = re.compile(r"status code (\d{3})")
_DELAY = re.compile(r" in (\d+(?:\.\d+)?) seconds")
_COUNT = re.compile(r"\(retry (\d+) of (\d+)\)")


def retry_line(reason: str | None, message: str) -> str:
    """The user's line for an SDK's "Retrying request ..." message. Pure, total."""
    why = "the model API did not answer"
    if reason:
        status = _STATUS.search(reason)
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


class _RetryListener(logging.Handler):
    def __init__(self, report: Callable[[str], None]) -> None:
        super().__init__(logging.DEBUG)
        self._report = report
        self._reason: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break the turn
            return
        if message.startswith("Retrying request"):
            reason, self._reason = self._reason, None
            self._report(retry_line(reason, message))
        elif message.startswith(("Retrying due to", "Retrying as header", "Encountered")):
            self._reason = message
        elif message.startswith("Sending HTTP Request"):
            self._reason = None


@contextmanager
def report_sdk_retries(report: Callable[[str], None]) -> Iterator[None]:
    """Call ``report(line)`` for each retry the model SDKs make inside the block."""
    listener = _RetryListener(report)
    saved: list[tuple[logging.Logger, int]] = []
    for name in SDK_LOGGERS:
        log = logging.getLogger(name)
        saved.append((log, log.level))
        log.addHandler(listener)
        if log.getEffectiveLevel() > logging.DEBUG:
            log.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        for log, level in saved:
            log.removeHandler(listener)
            log.setLevel(level)
