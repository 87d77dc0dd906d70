"""Free loopback ports for the real servers the tests start.

``free_ports(n)`` keeps every socket open until all ``n`` are chosen, so one
call never hands out the same port twice (two ``free_port()`` calls in a row
can: the kernel may give back the port the first call just closed).
"""

from __future__ import annotations

import contextlib
import socket


def free_ports(n: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def free_port() -> int:
    return free_ports(1)[0]
