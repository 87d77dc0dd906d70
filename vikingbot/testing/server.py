"""Serve an ASGI app on a free loopback port in a background thread (for fakes in tests).

    with serve_app(app) as base_url:   # e.g. "http://127.0.0.1:54321"
        ...

The server is up when the block starts and stopped (thread joined) when it ends.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


@contextmanager
def serve_app(app: Any, **uvicorn_options: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 and yield its base URL.

    Extra keyword arguments go to ``uvicorn.Config`` (e.g. ``ws="websockets"``).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    options: dict[str, Any] = {
        "log_level": "warning",
        "lifespan": "off",
        "ws": "none",
        # A request still open at the end (a fake told to hang) is cancelled after
        # this long instead of holding the thread until the join times out.
        "timeout_graceful_shutdown": 1.0,
    }
    options.update(uvicorn_options)
    server = _Server(uvicorn.Config(app, **options))
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
