"""Which files changed, learnt from the operating system instead of by polling.

A :class:`Watcher` asks ``watchfiles`` (inotify on Linux, FSEvents on macOS,
ReadDirectoryChangesW on Windows) to watch some folders and collects the paths
that changed until the owner :meth:`~Watcher.drain`\\ s them: pushed from a
background thread of ours (for an owner that must act at once, ``on_change``),
or, with ``pull=True``, pulled from ``watchfiles`` at each drain. ``watchfiles``
keeps what the OS reported between looks in its own thread, which sleeps on the
OS and costs nothing while nothing changes; our thread's loop wakes every step
(see :data:`STEP_MS`), so an owner that only needs the changes at its own
moments (the heartbeat, once a cycle) pulls. It never decides anything itself:
the owner keeps its own view of the files and uses the drained paths to know
which parts of that view to re-read.

When notifications cannot be trusted the watcher says so and the owner falls
back to polling: :meth:`Watcher.start` returns ``False`` when the platform or
the watch limit refuses the watch (or ``watchfiles`` is not installed), and
:meth:`Watcher.drain` returns ``None`` (meaning "rescan everything") after the
background thread died (or a pulled watch raised), so changes it may have missed are
never silently lost.
:meth:`Watcher.restart` swaps in a new set of watched paths without a gap (the
new watch is in place before the old one stops).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from loguru import logger

Accept = Callable[[str], bool]

# How long the thread sleeps between looks at what the OS reported (watchfiles has no
# blocking wait: its loop wakes every step, takes the GIL and checks the stop event
# and signals), and how long it waits for more events before handing a batch over.
# Each wake-up costs ~0.1 ms of CPU (measured 100-126 us): 50 ms steps made an idle
# watcher cost 2 ms of CPU a second, 1.2 s per ten-minute heartbeat interval, and
# an idle gateway's CPU halved with longer steps (``idle_cpu_per_s`` in
# bench/heartbeat_cycle.py). A change is handed over one to two steps after it.
STEP_MS = 1000
TIMEOUT_MS = 1000  # at least this often ``watch()`` returns to this module's loop (a dead OS
# watch is noticed there)


PULL_ROUNDS = 64  # a drain takes at most this many batches (more arrive: the next drain)


class _Generation:
    """One ``watchfiles`` watch and the thread that reads it (none when pulled)."""

    def __init__(self, notify: Any, owner: Watcher) -> None:
        self.notify = notify
        self.stop = threading.Event()
        self.failed = False  # pulled: the watch raised (it is closed)
        self.thread = (
            None
            if owner.pull
            else threading.Thread(
                target=owner._run, args=(self,), name=f"watch:{owner.name}", daemon=True
            )
        )

    @property
    def alive(self) -> bool:
        return not self.failed if self.thread is None else self.thread.is_alive()


class Watcher:
    """Collects changed paths under ``paths`` (see the module docstring)."""

    def __init__(
        self,
        paths: Iterable[Path | str],
        *,
        name: str,
        recursive: bool = False,
        accept: Accept | None = None,
        on_change: Callable[[set[str]], object] | None = None,
        step_ms: int = STEP_MS,
        pull: bool = False,
    ) -> None:
        if pull and on_change is not None:
            raise ValueError("a pulled watcher has no thread to call on_change from")
        self.pull = pull
        self._pulling = threading.Lock()  # one look at the watch at a time (it is not shared)
        self.paths = [str(p) for p in paths]
        self.step_ms = step_ms
        self.name = name
        self.recursive = recursive
        self.accept = accept
        # called from the watcher's thread with the paths that just arrived (an empty set:
        # the watch died, the owner looks and finds it must poll)
        self.on_change = on_change
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._lost = False  # events may have been missed since the last drain
        self._current: _Generation | None = None
        self.problem: str | None = None  # why the watcher is not running, for status

    @property
    def running(self) -> bool:
        gen = self._current
        return gen is not None and gen.alive

    def start(self) -> bool:
        """Start watching; ``False`` (and :attr:`problem` says why) when it cannot."""
        return self.restart(self.paths)

    def restart(self, paths: Iterable[Path | str]) -> bool:
        """Watch ``paths`` instead; the old watch runs until the new one is in place."""
        wanted = [str(p) for p in paths]
        notify = self._open(wanted)
        if notify is None:
            return False
        gen = _Generation(notify, self)
        old, self._current = self._current, gen
        self.paths = wanted
        if gen.thread is not None:
            gen.thread.start()
        if old is not None:
            old.stop.set()
            if old.thread is None:  # what the old watch still holds, then it closes
                self._pull(old)
                with self._pulling:
                    old.failed = True  # closed on purpose: a late look takes nothing
                    self._close(old)
        return True

    def _open(self, paths: list[str]) -> Any:
        try:
            from watchfiles._rust_notify import RustNotify
        except ImportError as exc:  # pragma: no cover - watchfiles is a dependency
            self.problem = f"watchfiles is not available ({exc})"
            return None
        try:
            return RustNotify(paths, False, False, 0, self.recursive, True)
        except Exception as exc:  # watch limit, missing folder, unsupported file system
            self.problem = f"cannot watch {len(paths)} paths: {exc}"
            logger.warning("file watcher {} not started, polling instead: {}", self.name, exc)
            return None

    def _run(self, gen: _Generation) -> None:
        step, timeout = self.step_ms, max(TIMEOUT_MS, self.step_ms)
        try:
            while not gen.stop.is_set():
                batch = gen.notify.watch(step, step, timeout, gen.stop)
                if not isinstance(batch, set):
                    continue  # "timeout", "stop" or "signal"
                paths = self._take(batch)
                if paths and self.on_change is not None:
                    self.on_change(paths)
        except Exception as exc:
            self._died(gen, exc)
        finally:
            self._close(gen)

    def _pull(self, gen: _Generation) -> None:
        """Take what ``watchfiles`` collected for ``gen`` since the last look (pulled)."""
        with self._pulling:
            if gen.failed:
                return
            for _ in range(PULL_ROUNDS):
                try:
                    batch = gen.notify.watch(1, 1, 1, None)
                except Exception as exc:
                    gen.failed = True
                    with self._lock:
                        self._lost = True  # an old watch's last events too (restart)
                    self._died(gen, exc)
                    self._close(gen)
                    return
                if not isinstance(batch, set):
                    return  # "timeout": nothing more
                self._take(batch)

    def _take(self, batch: set[tuple[int, str]]) -> set[str]:
        """Add a batch's accepted paths to the pending ones; those paths."""
        accept = self.accept
        paths = {p for _, p in batch if accept is None or accept(p)}
        if paths:
            with self._lock:
                self._pending |= paths
        return paths

    def _died(self, gen: _Generation, exc: Exception) -> None:
        if gen is self._current:
            self.problem = f"watcher stopped: {exc}"
            with self._lock:
                self._lost = True
            logger.warning("file watcher {} stopped, polling instead: {}", self.name, exc)
            if self.on_change is not None:
                self.on_change(set())  # the owner looks (and finds it must poll)

    @staticmethod
    def _close(gen: _Generation) -> None:
        close = getattr(gen.notify, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                close()

    def drain(self) -> set[str] | None:
        """Paths changed since the last drain, or ``None`` when some may have been missed
        (the watcher is not running, or it died and was restarted since the last drain)."""
        gen = self._current
        if gen is not None and gen.thread is None:
            self._pull(gen)
        with self._lock:
            if gen is None or not gen.alive or self._lost:
                self._lost = gen is None or not gen.alive
                self._pending.clear()
                return None
            out, self._pending = self._pending, set()
        return out

    def wait_for(self, paths: Iterable[Path | str], timeout: float | None = None) -> bool:
        """Block until events for all ``paths`` arrived (not drained); for tests and
        benches. By default for 5 s plus three steps."""
        import time

        wanted = {str(p) for p in paths}
        if timeout is None:
            timeout = 5.0 + 3 * self.step_ms / 1000
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            gen = self._current
            if gen is not None and gen.thread is None:
                self._pull(gen)
            with self._lock:
                if wanted <= self._pending:
                    return True
            if not self.running:
                return False
            time.sleep(0.005)
        return False

    def stop(self) -> None:
        gen, self._current = self._current, None
        if gen is not None:
            gen.stop.set()
            if gen.thread is None:
                with self._pulling:
                    self._close(gen)
            elif gen.thread is not threading.current_thread():
                # the thread sees the stop within one step; not waited for longer than
                # half a second (it is a daemon thread and closes the OS watch itself)
                gen.thread.join(timeout=min(0.5, self.step_ms / 1000 + 0.1))
