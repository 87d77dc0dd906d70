"""Time, injectable. Production code asks a Clock; tests set one."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Current time, timezone-aware (UTC)."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A clock you can set and advance; never moves on its own."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware datetime")

    def now(self) -> datetime:
        return self._now

    def set(self, when: datetime) -> None:
        self._now = when

    def advance(self, **delta: float) -> datetime:
        self._now += timedelta(**delta)
        return self._now


NAP_CHECK_S = 5.0
"""How often a long wait looks at the wall clock."""
SLEEP_JUMP_S = 30.0
"""The wall clock ahead of the monotonic clock by more than this during one look: the
machine was suspended (a laptop's lid), or the clock was set forward."""


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``event``; whether it is set.

    ``asyncio.timeout`` rather than ``wait_for``: no task per wait (an idle gateway
    waits like this several times a minute), and a cancel is never lost (Python 3.11,
    docs/architecture.md section 10)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
    return event.is_set()


async def nap(
    wake: asyncio.Event, seconds: float, clock: Clock, *, check_s: float = NAP_CHECK_S
) -> float:
    """Wait up to ``seconds`` (monotonic) for ``wake``; return early when the machine slept.

    The event loop's monotonic clock does not count a suspend, so a plain wait
    started before the lid closed ends up to ``seconds`` after it opens. Looking
    at ``clock`` every ``check_s`` notices the jump within ``check_s`` of waking.
    Returns how many seconds the wall clock jumped (0.0: no jump seen).
    """
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        wall, mono = clock.now(), time.monotonic()
        if await wait_event(wake, min(left, check_s)):
            return 0.0
        jump = (clock.now() - wall).total_seconds() - (time.monotonic() - mono)
        if jump > SLEEP_JUMP_S:
            return jump
    return 0.0
