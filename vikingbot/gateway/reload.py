"""Config edits applied without a restart: watch the config file and the ``.env``
files, re-read them, hand the result on.

File system events (``vikingbot.watch``) wake the watcher at once; without them
(or when they stop) it stats the files every ``poll_s``. A bad edit is logged and
the old config stays.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from vikingbot.errors import ConfigError

if TYPE_CHECKING:
    from vikingbot.config.schema import Config
    from vikingbot.gateway.applying import Report


class ConfigWatch:
    """``load()`` re-reads the config (raising ``ConfigError`` on a bad edit);
    ``apply(config, generation)`` hands a good one to the running gateway and says
    what it did (a :class:`~vikingbot.gateway.applying.Report`). ``path`` is the
    config file; ``also`` are the other files it is made from (the ``.env`` files,
    which may not exist yet): a change to any of them is a reload."""

    def __init__(
        self,
        path: Path,
        *,
        load: Callable[[], Config],
        apply: Callable[[Config, int], Awaitable[Report]],
        also: tuple[Path, ...] = (),
        poll_s: float = 2.0,
    ) -> None:
        self.path = path
        self.files = tuple(dict.fromkeys(Path(os.path.abspath(p)) for p in (path, *also)))
        self.load = load
        self.apply = apply
        self.poll_s = poll_s
        self._mtimes: tuple[tuple[int, int] | None, ...] = ()
        self.generation = 0  # reloads applied since the gateway started
        self.last: Report | None = None
        self._lock = asyncio.Lock()

    def stat(self) -> None:
        """Remember the files as they are now (edits are changes from this)."""
        self._mtimes = tuple(_mtime(p) for p in self.files)

    async def watch(self, stop: asyncio.Event) -> None:
        """Reload on every change until ``stop``."""
        from vikingbot.watch import Watcher

        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        names = {str(p) for p in self.files}
        watcher = Watcher(
            list(dict.fromkeys(p.parent for p in self.files)),
            name="config",
            accept=lambda p: os.path.abspath(p) in names,
            on_change=lambda _paths: loop.call_soon_threadsafe(changed.set),
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
                before = self._mtimes
                self.stat()
                if self._mtimes == before or stop.is_set():
                    continue
                await self.reload()
        finally:
            await asyncio.to_thread(watcher.stop)

    async def reload(self) -> Report:
        """Re-read the config now and apply it (the watcher; ``config set`` through the
        control API, which waits for this answer): what was applied, or why not."""
        from vikingbot.gateway.applying import Report

        async with self._lock:  # one reload at a time: generations are in order
            self.stat()
            try:
                config = await asyncio.to_thread(self.load)
            except ConfigError as exc:
                logger.error("config change not applied: {}", exc)
                self.last = Report(self.generation, applied=False, error=str(exc))
                return self.last
            self.generation += 1
            self.last = await self.apply(config, self.generation)
            logger.info("config reloaded from {} (generation {})", self.path, self.generation)
            return self.last


def _mtime(path: Path) -> tuple[int, int] | None:
    """When and how large (a rewrite within the clock's granularity changes the size)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size
