"""Waiting on a condition in async tests: look again every 20 ms, fail naming what
never came."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Return once ``check()`` is true; fail after ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)
