"""Serve an ASGI app on a free loopback port (for fakes and routes in tests).

    with serve_app(app) as base_url:   # e.g. "http://127.0.0.1:54321"
        ...
    async with serving(app) as base_url:  # on the test's own event loop
        ...

``serve_app`` runs the server in a background thread with its own event loop: right
for a fake platform, wrong for routes whose handlers touch objects bound to the
test's loop (a channel manager's routes publish to its ``MessageBus``: a queue
woken from another thread can leave its reader asleep for good). Serve those with
``serving``. The server is up when the block starts and stopped when it ends.
Stopping takes milliseconds: uvicorn's own loop looks for the exit flag every
0.1 s and then sleeps 0.1 s more before it waits for the connections, which cost
~0.17 s per fake server, hundreds of times per test run.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import uvicorn

STARTUP_TIMEOUT_S = 10.0
STEP_S = 0.005  # how often the stopping server looks whether its connections are gone


class _Server(uvicorn.Server):
    """``uvicorn.Server`` that stops when told, not at its next tick.

    ``main_loop`` waits on an event ``stop()`` sets from any thread, instead of
    waking every 0.1 s (its tick refreshes the Date header and counts requests
    for ``limit_max_requests``: a fake needs neither). ``shutdown`` does what
    uvicorn's does (stop listening, ask each connection to close, wait for them
    and the running requests at most ``timeout_graceful_shutdown``, then cancel
    what is left) in steps of ``STEP_S`` instead of 0.1 s.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit: asyncio.Event | None = None

    async def main_loop(self) -> None:
        await self.on_tick(0)  # the Date header
        self._exit = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if not self.should_exit:  # stop() may have come before the event existed
            await self._exit.wait()

    def stop(self) -> None:
        """Ask the server to stop (from any thread); the thread then ends."""
        self.should_exit = True
        loop, event = self._loop, self._exit
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has ended already
                loop.call_soon_threadsafe(event.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()
        loop = asyncio.get_running_loop()
        limit = self.config.timeout_graceful_shutdown  # None: as long as they take
        deadline = None if limit is None else loop.time() + limit
        while (state.connections or state.tasks) and not self.force_exit:
            if deadline is not None and loop.time() >= deadline:
                for task in state.tasks:
                    task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
                # and the connections still open are closed now: left to the garbage
                # collector, each is a ResourceWarning in whichever test runs next
                for connection in list(state.connections):
                    transport = getattr(connection, "transport", None)
                    if transport is not None:
                        transport.close()
                await asyncio.sleep(0)  # their connection_lost callbacks run
                break
            await asyncio.sleep(STEP_S)
        else:
            for server in self.servers:
                await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()


def _bound(app: Any, uvicorn_options: dict[str, Any]) -> tuple[socket.socket, int, _Server]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    options: dict[str, Any] = {
        "log_level": "warning",
        "lifespan": "off",
        "ws": "none",
        # A request still open at the end (a fake told to hang) is cancelled after
        # this long instead of holding the server until the stop times out.
        "timeout_graceful_shutdown": 1.0,
    }
    options.update(uvicorn_options)
    return sock, sock.getsockname()[1], _Server(uvicorn.Config(app, **options))


@contextmanager
def serve_app(app: Any, **uvicorn_options: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 in a thread and yield its base URL.

    Extra keyword arguments go to ``uvicorn.Config`` (e.g. ``ws="websockets"``).
    """
    sock, port, server = _bound(app, uvicorn_options)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"serve_app:{port}", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"test server on 127.0.0.1:{port} did not start")
            time.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        thread.join(timeout=STARTUP_TIMEOUT_S)
        sock.close()


@asynccontextmanager
async def serving(app: Any, **uvicorn_options: Any) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 on the running event loop; yield its URL."""
    sock, port, server = _bound(app, uvicorn_options)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=f"serving:{port}")
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not server.started:
            if task.done() or time.monotonic() > deadline:
                raise RuntimeError(f"test server on 127.0.0.1:{port} did not start")
            await asyncio.sleep(STEP_S)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        if not server.started:
            task.cancel()
        await asyncio.wait({task}, timeout=STARTUP_TIMEOUT_S)
        sock.close()


def wait_until(
    cond: threading.Condition, ready: Callable[[], bool], timeout: float, what: str
) -> None:
    """Block until ``ready()`` holds under ``cond`` (notified by the server thread)."""
    deadline = time.monotonic() + timeout
    with cond:
        while not ready():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{what}: timed out waiting")
            cond.wait(left)
