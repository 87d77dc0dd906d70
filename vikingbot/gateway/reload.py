"""Config edits applied without a restart: watch the config file, re-read it, hand it on.

File system events (``vikingbot.watch``) wake the watcher at once; without them
(or when they stop) it stats the file every ``poll_s``. A bad edit is logged and
the old config stays.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from vikingbot.errors import ConfigError

if TYPE_CHECKING:
    from vikingbot.config.schema import Config


class ConfigWatch:
    """``load()`` re-reads the file (raising ``ConfigError`` on a bad edit);
    ``apply(config)`` hands a good one to the running gateway."""

    def __init__(
        self,
        path: Path,
        *,
        load: Callable[[], Config],
        apply: Callable[[Config], None],
        poll_s: float = 2.0,
    ) -> None:
        self.path = path
        self.load = load
        self.apply = apply
        self.poll_s = poll_s
        self._mtime: int | None = None

    def stat(self) -> None:
        """Remember the file as it is now (edits are changes from this)."""
        try:
            self._mtime = self.path.stat().st_mtime_ns
        except OSError:
            self._mtime = None

    async def watch(self, stop: asyncio.Event) -> None:
        """Reload on every change until ``stop``."""
        from vikingbot.watch import Watcher

        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        watcher = Watcher(
            [self.path.parent],
            name="config",
            accept=lambda p: os.path.basename(p) == self.path.name,
            on_change=lambda: loop.call_soon_threadsafe(changed.set),
        )
        await asyncio.to_thread(watcher.start)
        try:
            while not stop.is_set():
                timeout = 60.0 if watcher.running else self.poll_s
                stopped = asyncio.ensure_future(stop.wait())
                woke = asyncio.ensure_future(changed.wait())
                await asyncio.wait({stopped, woke}, timeout=timeout, return_when="FIRST_COMPLETED")
                for task in (stopped, woke):
                    task.cancel()
                changed.clear()
                watcher.drain()
                before = self._mtime
                self.stat()
                if self._mtime == before or stop.is_set():
                    continue
                await self.reload()
        finally:
            await asyncio.to_thread(watcher.stop)

    async def reload(self) -> None:
        """Re-read the config file now (the watcher, and the dashboard after an edit)."""
        self.stat()
        try:
            config = await asyncio.to_thread(self.load)
        except ConfigError as exc:
            logger.error("config change not applied: {}", exc)
            return
        self.apply(config)
        logger.info("config reloaded from {}", self.path)
