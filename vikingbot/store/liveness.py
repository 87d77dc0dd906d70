"""When a gateway counts as alive: one rule for everything that reads the registry.

Each gateway keeps a row in ``gateways`` (``vikingbot.gateway.registry``): it beats
``seen_at`` every few seconds and sets ``stopped_at`` on a clean exit. A gateway
is alive while its row is not stopped and was seen within ``DEAD_AFTER_S``. The
registry's listing (``/health``, ``status``), the outbox (whose pending rows a
live gateway is sending) and the kept inbound messages (whose taker may answer
them) all ask this module, so they never disagree about who is alive.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import exists, select

from vikingbot.store.tables import gateways

DEAD_AFTER_S = 30.0  # a gateway not seen for this long is taken to be dead
GatewayState = Literal["running", "stopped", "dead"]


def process_id() -> str:
    """An id unique to this process and start: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def alive_gateway(holder: Any, now: datetime, dead_after_s: float = DEAD_AFTER_S) -> Any:
    """SQL: ``holder`` (a column naming a gateway) is a live gateway at ``now``."""
    fresh = now - timedelta(seconds=dead_after_s)
    return exists(
        select(gateways.c.id).where(
            gateways.c.id == holder,
            gateways.c.stopped_at.is_(None),
            gateways.c.seen_at > fresh,
        )
    )


def gateway_state(
    stopped_at: datetime | None,
    seen_at: datetime,
    now: datetime,
    dead_after_s: float = DEAD_AFTER_S,
) -> GatewayState:
    """The same rule for one row read into Python."""
    if stopped_at is not None:
        return "stopped"
    if seen_at <= now - timedelta(seconds=dead_after_s):
        return "dead"
    return "running"
