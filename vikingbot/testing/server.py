"""Serve an ASGI app on a free loopback port in a background thread (for fakes in tests).

    with serve_app(app) as base_url:   # e.g. "http://127.0.0.1:54321"
        ...

The server is up when the block starts and stopped (thread joined) when it ends.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

STARTUP_TIMEOUT_S = 10.0


@contextmanager
def serve_app(app: Any, **uvicorn_options: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 and yield its base URL.

    Extra keyword arguments go to ``uvicorn.Config`` (e.g. ``ws="websockets"``).
    """
    import uvicorn

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
    server = uvicorn.Server(uvicorn.Config(app, **options))
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
        server.should_exit = True
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
