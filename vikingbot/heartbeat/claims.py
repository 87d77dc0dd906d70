"""The claims a gateway's heartbeat units run under: kept, checked, ended.

A unit runs under a ``Claim`` (``store/leases``) that lasts ``bot.gateway.lease_s``.

- ``Fence.check`` before every send and before the commit: it proves the claim is
  still this gateway's, or raises ``LeaseLost`` (a late finisher whose lease ran
  out while its turn still ran, and that another gateway took over, neither
  delivers nor records). The proof costs no round trip while the claim is
  *fresh*: its expiry was set by the lease clock after ``stamp`` was read (before
  the claim or renewal statement was sent), so while less than ``FRESH_SHARE`` of
  the lease has passed since, at least the rest of it is left, whatever the skew
  between this machine's clock and the database's. Past that the check renews the
  claim (one write) and fails when the renewal does.
- ``Renewals`` renews every claim of a cycle's running units together, every
  third of a lease, in one transaction, on a timer: a unit shorter than that
  (most) never renews, and no task is started per unit.
- ``Hold.end_in`` ends the claim inside the unit's last commit: a used claim is
  marked done (checked under the row lock: a lost fence rolls the commit back),
  an unused one released.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loguru import logger

from vikingbot.errors import VikingbotError
from vikingbot.store.leases import Claim, LeaseLost, Leases

if TYPE_CHECKING:
    from sqlalchemy import Connection

FRESH_SHARE = 0.5  # a check within the first half of a lease needs no round trip
RENEW_SHARE = 1 / 3  # renewed this often (a share of the lease)


class Fence:
    """Checks a unit's claim before its effects (see the module doc).

    No claim (no leases configured): always good.
    """

    def __init__(self, leases: Leases | None, claim: Claim | None, lease_s: float) -> None:
        self.leases = leases
        self.claim = claim
        self.lease_s = lease_s
        self.lost: str | None = None
        self.stamp = claim.stamp if claim is not None else 0.0  # last proof it is ours

    def fresh(self) -> bool:
        """Whether the claim is provably this gateway's without asking the database,
        with at least ``1 - FRESH_SHARE`` of a lease left."""
        assert self.leases is not None
        return self.leases.stamp() - self.stamp < self.lease_s * FRESH_SHARE

    def renewed(self, stamp: float) -> None:
        """The claim was renewed by a statement sent after ``stamp``."""
        self.stamp = max(self.stamp, stamp)

    async def check(self, doing: str = "go on") -> None:
        if self.leases is None or self.claim is None:
            return
        if self.lost is None and not self.fresh():
            stamp = self.leases.stamp()
            try:
                kept = await asyncio.to_thread(self.leases.renew, self.claim, self.lease_s)
            except VikingbotError as exc:  # cannot prove the claim is still ours
                raise LeaseLost(
                    f"cannot {doing} for {self.claim.key!r}: the claim could not be renewed ({exc})"
                ) from exc
            if kept:
                self.renewed(stamp)
            else:
                self.lost = "another gateway has taken it over"
        if self.lost is not None:
            raise LeaseLost(
                f"heartbeat unit {self.claim.key!r}: the lease of {self.claim.owner} "
                f"(fence {self.claim.fence}) was lost ({self.lost}); did not {doing}"
            )


class Renewals:
    """Renews the claims of running units together, every ``RENEW_SHARE`` of a lease.

    ``hold`` a unit's fence when it starts and ``let_go`` when it ends. A timer (not
    a task) waits for the next renewal, and only while some claim is held; the
    renewal itself is one transaction for all held claims (``Leases.renew_all``). A
    renewal that fails is logged and tried again at the next tick; the fences of
    claims another gateway took over are marked lost.
    """

    def __init__(self, leases: Leases, lease_s: float) -> None:
        self.leases = leases
        self.lease_s = lease_s
        self._held: dict[int, Fence] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def hold(self, fence: Fence) -> None:
        if fence.claim is None:
            return
        self._held[id(fence)] = fence
        self._arm()

    def let_go(self, fence: Fence) -> None:
        self._held.pop(id(fence), None)
        if not self._held and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self) -> None:
        if self._timer is None and self._task is None and self._held:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.lease_s * RENEW_SHARE, self._due)

    def _due(self) -> None:
        self._timer = None
        if self._held:
            self._task = asyncio.create_task(self._renew(), name="heartbeat-claims-renewal")

    async def _renew(self) -> None:
        fences = list(self._held.values())
        stamp = self.leases.stamp()
        claims = [f.claim for f in fences if f.claim is not None and f.lost is None]
        try:
            kept = await asyncio.to_thread(self.leases.renew_all, claims, self.lease_s)
        except VikingbotError as exc:  # the next tick (or a fence check) tries again
            logger.warning("heartbeat claims: renewal of {} failed: {}", len(claims), exc)
        else:
            for fence in fences:
                if fence.claim is None or fence.lost is not None:
                    continue
                if fence.claim.key in kept:
                    fence.renewed(stamp)
                else:
                    fence.lost = "another gateway has taken it over"
        finally:
            self._task = None
            self._arm()


@dataclass
class Hold:
    """The claim a unit runs under. Ending it goes into the unit's last commit, so the
    results and the release are one transaction (``ended`` once that committed).

    Every claim key names one run of its unit (``runner.unit_key``), so a used claim
    is marked done: no gateway runs that run again. Marking it done checks the fence
    under the row lock: when another gateway has taken the unit over meanwhile the
    whole commit (ledger row, states) is rolled back (``LeaseLost``).
    """

    claim: Claim
    ended: bool = False

    def end_in(self, leases: Leases, used: bool) -> Callable[[Connection], None]:
        def end(conn: Connection) -> None:
            if not used:
                leases.release_in(conn, self.claim)
            elif not leases.mark_done_in(conn, self.claim):  # done also ends the expiry
                raise LeaseLost(
                    f"heartbeat unit {self.claim.key!r}: another gateway took it over "
                    f"from {self.claim.owner} (fence {self.claim.fence}); result not recorded"
                )

        return end
