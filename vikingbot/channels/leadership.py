"""One receiver per chat channel across the gateways sharing a database.

Telegram allows one ``getUpdates`` consumer per bot and Slack delivers a Socket
Mode event to one connection, so of several gateways only one may receive a
channel's messages; all of them may send. ``Leadership`` keeps the lease
``channel:<name>:<channel_id>`` (``vikingbot.store.leases``) for one gateway:

- a gateway that claims the lease starts receiving and renews it every
  ``check_s`` seconds (the lease lasts ``ttl_s``);
- when a renewal says the lease was lost, or renewals have failed (database
  unreachable) for ``STOP_FRACTION`` of ``ttl_s``, it stops receiving - before
  the lease can run out and another gateway take over, so two never receive at once;
- the others try to claim every ``check_s`` seconds, so after the holder dies
  another receives within ``ttl_s + check_s`` (20 s with the defaults), and at
  once after a clean stop (the lease is released).

On SQLite (one gateway per home) the same code runs: the only gateway holds every
lease. Webhook channels do not need this: every gateway serves webhook inbound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from loguru import logger

from vikingbot.errors import VikingbotError
from vikingbot.store.leases import Claim, Leases

TTL_S = 15.0
CHECK_S = 5.0
STOP_FRACTION = 0.6  # of ttl_s without a successful renewal: stop receiving


def channel_key(name: str, channel_id: str = "default") -> str:
    return f"channel:{name}:{channel_id}"


class Leadership:
    """Holds one channel's receive lease for this gateway while it can."""

    def __init__(
        self,
        leases: Leases,
        owner: str,
        key: str,
        *,
        start: Callable[[], Awaitable[None]],
        stop: Callable[[], Awaitable[None]],
        ttl_s: float = TTL_S,
        check_s: float = CHECK_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < check_s < ttl_s * STOP_FRACTION:
            raise ValueError(f"check_s ({check_s}) must be below {STOP_FRACTION} * ttl_s ({ttl_s})")
        self.leases = leases
        self.owner = owner
        self.key = key
        self._start = start
        self._stop = stop
        self.ttl_s = ttl_s
        self.check_s = check_s
        self._monotonic = monotonic
        self.claim: Claim | None = None
        self._renewed_at = 0.0

    @property
    def held(self) -> bool:
        return self.claim is not None

    async def step(self) -> None:
        """One check: claim, renew, or give up. Database errors are logged, not raised."""
        try:
            if self.claim is None:
                found = await asyncio.to_thread(self.leases.claim, self.key, self.owner, self.ttl_s)
                if isinstance(found, Claim):
                    await self._take(found)
            elif await asyncio.to_thread(self.leases.renew, self.claim, self.ttl_s):
                self._renewed_at = self._monotonic()
            else:
                await self._give_up("another gateway holds it now")
        except VikingbotError as exc:
            logger.warning("channel lease {}: {}", self.key, exc)
            silent = self._monotonic() - self._renewed_at
            if self.claim is not None and silent >= self.ttl_s * STOP_FRACTION:
                await self._give_up(f"no renewal for {silent:.0f}s")

    async def run(self) -> None:
        """Check every ``check_s`` seconds until cancelled; then release the lease."""
        try:
            while True:
                await self.step()
                await asyncio.sleep(self.check_s)
        finally:
            await asyncio.shield(self.release())

    async def release(self) -> None:
        """Stop receiving and hand the lease on at once (a clean shutdown)."""
        claim, self.claim = self.claim, None
        if claim is None:
            return
        await self._stop_quietly()
        try:
            await asyncio.to_thread(self.leases.release, claim)
        except VikingbotError as exc:
            logger.warning("channel lease {}: could not release: {}", self.key, exc)

    async def _take(self, claim: Claim) -> None:
        self.claim = claim
        self._renewed_at = self._monotonic()
        logger.info("channel lease {}: taken by {} (fence {})", self.key, self.owner, claim.fence)
        try:
            await self._start()
        except Exception as exc:  # cannot receive: let another gateway try
            logger.opt(exception=not isinstance(exc, VikingbotError)).error(
                "channel lease {}: could not start receiving: {}", self.key, exc
            )
            await self.release()

    async def _give_up(self, why: str) -> None:
        logger.warning("channel lease {}: stop receiving ({})", self.key, why)
        self.claim = None
        await self._stop_quietly()

    async def _stop_quietly(self) -> None:
        try:
            await self._stop()
        except Exception:
            logger.exception("channel lease {}: stopping the receiver failed", self.key)
