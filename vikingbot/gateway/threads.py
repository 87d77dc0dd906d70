"""Can the gateway's own services still get a worker thread? (``/health``)

The store, sessions and delivery run their blocking calls in asyncio's default
thread pool. ``ThreadProbe`` asks that pool for a thread every ``every_s``
seconds; when a request has waited longer than ``late_s``, ``problems()`` says
so and the gateway's ``/health`` turns ``degraded``. Agents have a pool of
their own (``vikingbot.agentio``), so a misbehaving agent cannot cause this.
"""

from __future__ import annotations

import asyncio
import time

from vikingbot.clock import wait_event


def _nothing() -> None:
    return None


class ThreadProbe:
    """A supervised loop that times how long a thread of the default pool takes to come."""

    def __init__(self, *, every_s: float = 30.0, late_s: float = 5.0) -> None:
        self.every_s = every_s
        self.late_s = late_s
        self.waiting_since: float | None = None

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.waiting_since = time.monotonic()
            await asyncio.to_thread(_nothing)
            self.waiting_since = None
            await wait_event(stop, self.every_s)

    def problems(self) -> list[str]:
        since = self.waiting_since
        if since is None or time.monotonic() - since <= self.late_s:
            return []
        waited = time.monotonic() - since
        return [f"no worker thread free for the gateway's services for {waited:.0f} s"]
