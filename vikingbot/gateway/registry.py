"""The gateways registry: which gateways share this state database, and are they alive.

Each gateway process registers a row in ``gateways`` when it starts (its id is
``host:pid:random``, new on every start), refreshes ``seen_at`` every
``beat_s`` seconds with what it holds (chat channels it polls), and marks the row
stopped on a clean exit. A gateway whose row is older than ``dead_after_s`` is
taken to be dead: the outbox hands its pending messages to another gateway
(``vikingbot.delivery.outbox``), and its leases run out on their own.

``vikingbot status`` and ``/health`` list the rows (``GatewayRegistry.list``).
Times are the database's clock on PostgreSQL (see ``vikingbot.store.leases``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from loguru import logger
from sqlalchemy import delete, insert, select, update

from vikingbot import __version__
from vikingbot.clock import Clock, wait_event
from vikingbot.errors import VikingbotError
from vikingbot.store.db import StateStore
from vikingbot.store.leases import Leases, default_time_source, store_now
from vikingbot.store.liveness import DEAD_AFTER_S, GatewayState, gateway_state, process_id
from vikingbot.store.tables import gateways

BEAT_S = 5.0
FORGET_AFTER = timedelta(days=7)  # stopped or dead rows older than this are deleted
CHANNEL_PREFIX = "channel:"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # exists but not ours, or cannot tell: assume alive
    return True


@dataclass(frozen=True)
class GatewayInfo:
    id: str
    host: str
    pid: int
    address: str | None
    version: str | None
    started_at: datetime
    seen_at: datetime
    state: GatewayState  # running | stopped | dead (store/liveness.py)
    channels: list[str] = field(default_factory=list)  # leases held: "telegram:default"

    def as_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found["started_at"] = self.started_at.isoformat()
        found["seen_at"] = self.seen_at.isoformat()
        return found


class GatewayRegistry:
    """This gateway's row in ``gateways``, and a reader of everyone's."""

    def __init__(
        self,
        store: StateStore,
        clock: Clock,
        *,
        gateway_id: str | None = None,
        address: str | None = None,
        dead_after_s: float = DEAD_AFTER_S,
    ) -> None:
        self.store = store
        self.clock = clock
        self.id = (gateway_id or process_id())[:100]
        self.address = address
        self.dead_after_s = dead_after_s
        self._time_source = default_time_source(store)

    def register(self) -> None:
        """Write this gateway's row (and forget rows of gateways long gone)."""
        with self.store._failures("register the gateway"), self.store.engine.begin() as conn:
            now = store_now(conn, self.clock, self._time_source)
            conn.execute(delete(gateways).where(gateways.c.seen_at < now - FORGET_AFTER))
            self._reap_local(conn, now)
            conn.execute(
                insert(gateways).values(
                    id=self.id,
                    host=socket.gethostname()[:200],
                    pid=os.getpid(),
                    address=self.address,
                    version=__version__,
                    started_at=now,
                    seen_at=now,
                    details={},
                )
            )
        logger.info("gateway {} registered in the state database", self.id)

    @staticmethod
    def _reap_local(conn: Any, now: datetime) -> None:
        """Mark stopped the rows of gateways on this host whose process is gone.

        A gateway restarted after a crash then takes over what its previous run
        left (outbox rows) at once instead of after ``dead_after_s``.
        """
        host = socket.gethostname()[:200]
        rows = conn.execute(
            select(gateways.c.id, gateways.c.pid).where(
                gateways.c.host == host, gateways.c.stopped_at.is_(None)
            )
        ).all()
        gone = [r.id for r in rows if not _pid_alive(r.pid)]
        if gone:
            conn.execute(update(gateways).where(gateways.c.id.in_(gone)).values(stopped_at=now))

    def beat(self, details: dict[str, Any] | None = None) -> None:
        """Say this gateway is alive (and what it holds)."""
        values: dict[str, Any] = {"stopped_at": None}
        if details is not None:
            values["details"] = details
        with self.store._failures("refresh the gateway row"), self.store.engine.begin() as conn:
            now = store_now(conn, self.clock, self._time_source)
            conn.execute(
                update(gateways).where(gateways.c.id == self.id).values(seen_at=now, **values)
            )
            self._reap_local(conn, now)  # a gateway on this host that was killed: gone now

    def stopped(self) -> None:
        """Mark this gateway stopped (a clean exit)."""
        with self.store._failures("mark the gateway stopped"), self.store.engine.begin() as conn:
            now = store_now(conn, self.clock, self._time_source)
            conn.execute(
                update(gateways).where(gateways.c.id == self.id).values(stopped_at=now, seen_at=now)
            )

    def list(self, *, include_stopped: bool = False) -> list[GatewayInfo]:
        """The gateways sharing the database, oldest first; dead ones too, stopped on request."""
        leases = Leases(self.store, self.clock, time_source=self._time_source)
        held: dict[str, list[str]] = {}
        for lease in leases.holders(CHANNEL_PREFIX):
            held.setdefault(lease.holder, []).append(lease.key.removeprefix(CHANNEL_PREFIX))
        with self.store._failures("read the gateways"), self.store.engine.connect() as conn:
            now = store_now(conn, self.clock, self._time_source)
            rows = conn.execute(select(gateways).order_by(gateways.c.started_at)).all()
        found = []
        for r in rows:
            state = gateway_state(r.stopped_at, r.seen_at, now, self.dead_after_s)
            if state == "stopped" and not include_stopped:
                continue
            found.append(
                GatewayInfo(
                    id=r.id,
                    host=r.host,
                    pid=r.pid,
                    address=r.address,
                    version=r.version,
                    started_at=r.started_at,
                    seen_at=r.seen_at,
                    state=state,
                    channels=sorted(held.get(r.id, [])),
                )
            )
        return found


class Membership:
    """A running gateway's place in the registry: joined at start, a beat every
    ``beat_s`` with the channels it ``holds``, left on a clean stop; ``read_peers``
    reads everyone's rows for ``/health`` (``peers``: the last ones read). ``store_error`` is the last
    beat's database failure (``/health`` says ``degraded``), None once one works."""

    def __init__(
        self,
        registry: GatewayRegistry,
        holds: Callable[[], list[str]],
        beat_s: float = BEAT_S,
    ) -> None:
        self.registry = registry
        self.holds = holds
        self.beat_s = beat_s
        self.peers: list[dict[str, Any]] = []
        self.store_error: str | None = None

    async def join(self) -> None:
        try:
            await asyncio.to_thread(self.registry.register)
            await self.beat()
        except VikingbotError as exc:
            logger.warning("gateway registry: {}", exc)

    async def beat(self) -> None:
        try:
            await asyncio.to_thread(self.registry.beat, {"channels": self.holds()})
        except VikingbotError as exc:
            self.store_error = str(exc)
            raise
        self.store_error = None

    async def read_peers(self) -> list[dict[str, Any]]:
        """The registry's rows, read now (``/health`` asks; a beat only writes: an idle
        gateway reads nobody's rows). The last rows read when the database fails."""
        with contextlib.suppress(VikingbotError):
            self.peers = [p.as_dict() for p in await asyncio.to_thread(self.registry.list)]
        return self.peers

    async def run(self, stop: asyncio.Event) -> None:
        """Beat until ``stop``; a failed beat is logged (and shown in /health), not fatal."""
        while not stop.is_set():
            await wait_event(stop, self.beat_s)
            try:
                await self.beat()
            except VikingbotError as exc:
                logger.warning("gateway registry: {}", exc)

    async def leave(self) -> None:
        with contextlib.suppress(VikingbotError):
            await asyncio.to_thread(self.registry.stopped)
