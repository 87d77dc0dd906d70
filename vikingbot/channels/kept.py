"""Two guarantees a channel composes for its inbound messages: kept, and taken once.

:class:`KeptInbound` writes an accepted message to the state database before the
channel tells the platform it has it (the webhook's 202, a WhatsApp webhook's 200, a
Signal event stream moving on), marks it answered once the reply is with delivery,
and answers what a dead gateway (or this gateway's previous run) left pending. The
rows and their rules are :mod:`vikingbot.channels.inbound`'s.

:class:`FirstTake` answers "is this platform message new to every gateway on this
database?": the first gateway to claim ``<channel>:<kind>:<id>`` (a lease, never
released) takes it; a redelivery to another gateway, or to this one after a
restart, is dropped (Feishu's events, WhatsApp's webhooks, Signal's replayed buffer).
When the database cannot say within ``wait_s`` the message is taken anyway (at least
once, never lost) and a warning is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from typing import TYPE_CHECKING

from loguru import logger

from vikingbot.errors import StoreError

if TYPE_CHECKING:
    from vikingbot.bus import InboundMessage, MessageBus
    from vikingbot.channels.inbound import InboundStore
    from vikingbot.clock import Clock
    from vikingbot.store.db import StateStore
    from vikingbot.store.leases import Claim

SWEEP_S = 30.0  # how often a running gateway looks for a dead gateway's unanswered messages
REMEMBER = 10_000  # message ids one process remembers (the fast path before the database)


class KeptInbound:
    """Accepted messages of channel ``name`` kept in the state database until answered."""

    def __init__(
        self,
        name: str,
        store: StateStore,
        clock: Clock,
        gateway: str | None,
        *,
        sweep_s: float = SWEEP_S,
    ) -> None:
        from vikingbot.channels.inbound import InboundStore

        self.name = name
        self.gateway = gateway
        self.inbound: InboundStore = InboundStore(store, clock)
        self.sweep_s = sweep_s
        self._sweeper: asyncio.Task[None] | None = None

    async def keep(self, msg: InboundMessage) -> InboundMessage:
        """Write ``msg`` down (raises :class:`StoreError`); returns it with its row id."""
        return await asyncio.to_thread(self.inbound.keep, msg, self.gateway)

    def start(self, bus: MessageBus) -> None:
        """Answer, now and every ``sweep_s``, what no live gateway is answering (only in
        a gateway: a process without a gateway id leaves them to one)."""
        if self.gateway is not None and self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep(bus), name=f"{self.name}-inbound")

    async def stop(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper

    async def _sweep(self, bus: MessageBus) -> None:
        from vikingbot.channels.inbound import gave_up, row_id_of

        assert self.gateway is not None
        while True:
            try:
                taken = await asyncio.to_thread(self.inbound.take_orphans, self.gateway, self.name)
            except StoreError as exc:
                logger.warning("{}: cannot look for unanswered messages: {}", self.name, exc)
            else:
                for msg in taken:
                    tries = gave_up(msg)
                    if tries is not None:
                        logger.error(
                            "{}: inbound message {} was tried {} times without an answer (a "
                            "gateway crashed on it each time); answering it with an apology",
                            self.name,
                            row_id_of(msg),
                            tries,
                        )
                if taken:
                    logger.info(
                        "{}: answering {} accepted message(s) a previous run left",
                        self.name,
                        len(taken),
                    )
                for msg in taken:
                    await bus.publish_inbound(msg)
            await asyncio.sleep(self.sweep_s)

    async def answering(self, msg: InboundMessage) -> None:
        """A turn on ``msg`` begins (counted against the crash-loop limit)."""
        from vikingbot.channels.inbound import row_id_of

        row = row_id_of(msg)
        if row is None:
            return
        try:
            await asyncio.to_thread(self.inbound.started, row)
        except StoreError as exc:
            logger.warning("{}: cannot count the turn on message {}: {}", self.name, row, exc)

    async def answered(self, msg: InboundMessage) -> None:
        """``msg``'s reply is with delivery: never answer it again."""
        from vikingbot.channels.inbound import row_id_of

        row = row_id_of(msg)
        if row is None:
            return
        try:
            await asyncio.to_thread(self.inbound.answered, row)
        except StoreError as exc:  # answered again after a restart; the outbox sends once
            logger.warning("{}: cannot mark message {} answered: {}", self.name, row, exc)


class FirstTake:
    """Whether a platform message id is taken here first of all gateways on the database.

    The first gateway to claim ``<name>:<kind>:<id>`` (a lease held ``keep_s``, never
    released) takes it; this process also remembers the ids it saw, so its own repeats
    are dropped without asking the database. When the database cannot say within
    ``wait_s`` the message is taken (logged: at least once, never lost). A caller that
    then cannot keep what it took calls :meth:`forget`, so the platform's redelivery is
    taken again. An empty id cannot be told apart from another: it is always taken.
    """

    def __init__(
        self,
        name: str,
        store: StateStore | None,
        clock: Clock,
        owner: str,
        *,
        keep_s: float,
        wait_s: float = 2.0,
        kind: str = "message",
    ) -> None:
        from vikingbot.store.leases import Leases

        self.name = name
        self.owner = owner
        self.keep_s = keep_s
        self.wait_s = wait_s
        self.kind = kind
        self._leases = Leases(store, clock) if store is not None else None
        self._seen: OrderedDict[str, Claim | None] = OrderedDict()  # with this process's claim

    async def first(self, message_id: str) -> bool:
        """True when no gateway (this process included) took ``message_id`` before; also
        when the database cannot say in time."""
        from vikingbot.store.leases import Claim

        if not message_id:
            return True
        if message_id in self._seen:
            return False
        claim = None
        if self._leases is not None:
            key = f"{self.name}:{self.kind}:{message_id}"
            try:
                async with asyncio.timeout(self.wait_s):
                    found = await asyncio.to_thread(
                        self._leases.claim, key, self.owner, self.keep_s
                    )
            except (StoreError, TimeoutError) as exc:
                logger.warning(
                    "{}: cannot tell whether {} {} was taken before ({}); taking it (at least "
                    "once: a redelivery to another gateway may be answered twice)",
                    self.name,
                    self.kind,
                    message_id,
                    str(exc) or f"no answer from the database in {self.wait_s:g} s",
                )
            else:
                if not isinstance(found, Claim):
                    self._remember(message_id, None)
                    return False
                claim = found
        self._remember(message_id, claim)
        return True

    async def forget(self, message_id: str) -> None:
        """``message_id`` was taken but could not be kept: a redelivery is taken again
        (this process's claim on it is given up)."""
        claim = self._seen.pop(message_id, None)
        if claim is not None and self._leases is not None:
            try:
                await asyncio.to_thread(self._leases.release, claim)
            except StoreError as exc:  # the claim runs out by itself after keep_s
                logger.warning(
                    "{}: cannot give up {} {}: {}", self.name, self.kind, message_id, exc
                )

    def _remember(self, message_id: str, claim: Claim | None) -> None:
        self._seen[message_id] = claim
        if len(self._seen) > REMEMBER:
            self._seen.popitem(last=False)
