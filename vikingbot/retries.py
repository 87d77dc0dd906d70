"""Retries with exponential backoff: stamina, reporting through loguru.

``retry_context`` is stamina's (on tenacity): jittered exponential backoff, an
attempt cap, and an ``on`` hook that may return seconds to wait (a platform's
``retry_after``) or False to stop. Importing this module routes stamina's
retry reports to loguru at DEBUG instead of the standard library's logging,
whose last-resort handler would print them on the terminal; callers log their
own warning with what they know (channel, chat). Use it for every retry loop.
"""

from __future__ import annotations

import stamina
from loguru import logger
from stamina.instrumentation import RetryDetails, set_on_retry_hooks

retry_context = stamina.retry_context


def _report(details: RetryDetails) -> None:
    logger.debug(
        "retry {} of {} in {:.2f}s after {}",
        details.retry_num,
        details.name,
        details.wait_for,
        details.caused_by,
    )


set_on_retry_hooks([_report])

__all__ = ["retry_context"]
