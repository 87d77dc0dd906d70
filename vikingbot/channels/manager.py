"""The channel manager: starts the enabled channels and sends every outbound message.

It sends only what the delivery service resolved: :meth:`ChannelManager.send`
takes a sealed ``vikingbot.delivery.service.Outgoing`` (the gateway connects it as
the delivery service's sink) and refuses anything else. Each message goes through the outbox (see
:mod:`vikingbot.delivery.outbox`): written as pending, split to the channel's
limit, sent piece by piece with retries and backoff, marked sent. On start, and
every ``outbox_sweep_s`` after, it re-sends what a previous run, or another
gateway on the same database that died, left pending (``Outbox.claim_pending``:
one sender per row, see docs/scaling.md).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from loguru import logger
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from vikingbot import registry
from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.channels.base import Channel, Spawn, TellOwner, log_only, plain_spawn
from vikingbot.channels.leadership import Leadership, channel_key
from vikingbot.channels.text import split_text
from vikingbot.clock import Clock, SystemClock
from vikingbot.config.schema import ChannelBase, Config
from vikingbot.delivery.outbox import Outbox
from vikingbot.delivery.owner import channel_sections, owner_chat_for
from vikingbot.delivery.service import Outgoing
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import (
    ChannelBusy,
    ChannelError,
    ChannelRejected,
    StoreError,
    VikingbotError,
)
from vikingbot.store.leases import Leases

if TYPE_CHECKING:
    from starlette.routing import Mount

    from vikingbot.delivery.outbox import OutboxRow
    from vikingbot.store.db import StateStore

MAX_BACKOFF_S = 30.0
STORE_WAIT_S = 600.0  # how long an outbound message waits for an unreachable database
T = TypeVar("T")


class Applied(NamedTuple):
    """What a reload did to one channel: ``ok`` False when it did not start (``error``)."""

    channel: str
    action: str
    ok: bool
    error: str | None


class ChannelManager:
    """Owns the channel instances of one gateway (or one ``chat`` session).

    ``retry_delay_s`` is the first backoff between send attempts; it doubles
    per attempt (capped at 30 s). The number of retries is
    ``bot.channels.send_retries``. ``on_resent`` is awaited with each message
    that a previous run left pending and this one sent (the gateway records it
    in the chat's history, as a delivery that did not crash would have).
    ``spawn`` runs the manager's background loops (the outbox sweep, each channel's
    lease keeper); the gateway passes its supervisor's, so a loop that crashes is
    restarted and shows in ``/health``; by default they are plain tasks.
    """

    def __init__(
        self,
        config: Config,
        *,
        bus: MessageBus,
        store: StateStore,
        clock: Clock | None = None,
        retry_delay_s: float = 0.5,
        on_resent: Callable[[OutboundMessage], Awaitable[None]] | None = None,
        sender: str | None = None,
        outbox_sweep_s: float | None = None,
        spawn: Spawn | None = None,
        tell: TellOwner | None = None,
    ) -> None:
        self.config = config
        self.bus = bus
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.retry_delay_s = retry_delay_s
        self.on_resent = on_resent
        lease_s = config.bot.gateway.lease_s  # several gateways: docs/scaling.md
        self.outbox = Outbox(store, self.clock, sender=sender, dead_after_s=2 * lease_s)
        self.outbox_sweep_s = outbox_sweep_s if outbox_sweep_s is not None else lease_s
        self._spawn: Spawn = spawn or plain_spawn
        self._tell: TellOwner = tell or log_only
        self.store_wait_s = STORE_WAIT_S
        self._channels: dict[str, Channel] = {}
        self._errors: dict[str, str] = {}
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._recovery: asyncio.Task[int] | None = None
        self._sweeper: asyncio.Task[Any] | None = None
        self._leaders: dict[str, tuple[Leadership, asyncio.Task[None]]] = {}
        self._applying = asyncio.Lock()
        self.lease_ttl_s = lease_s
        self.lease_check_s = lease_s / 3
        # Counters for /metrics (vikingbot_outbox_*): possibly sent rows sent again
        # (their sender died mid-send), and those the platform showed had arrived.
        self.metrics: dict[str, int] = {
            "resent_after_crash_total": 0,
            "found_after_crash_total": 0,
        }

    # ---- lifecycle -------------------------------------------------------

    async def start(self) -> None:
        """Start every enabled channel (a failing one is logged, the rest go on).

        Then re-sends pending outbox rows in the background
        (:meth:`wait_recovered` waits for that). New messages come through
        :meth:`send`, which the gateway connects to the delivery service.
        """
        for name, section in channel_sections(self.config).items():
            if section.enabled:
                await self._start_one(name, section)
        self._recovery = asyncio.create_task(self._recover(), name="outbox-recovery")

    async def _start_one(self, name: str, section: ChannelBase) -> bool:
        """Start one channel (a failure is logged and kept for ``status``); True when up."""
        self._errors.pop(name, None)
        try:
            cls = registry.load_ready("channels", name)
            channel: Channel = cls(
                section,
                owner_chat=owner_chat_for(self.config, name),
                store=self.store,
                clock=self.clock,
                gateway=self.outbox.sender,
            )
            channel.spawn = self._spawn
            channel.tell_owner = self._tell
            self._channels[name] = channel
            channel.defer_receiving = channel.exclusive_inbound
            await channel.start(self.bus)
            channel.running = True
            logger.info("channel {} started", name)
            if channel.exclusive_inbound:
                await self._lead(name, channel)
        except Exception as exc:
            self._errors[name] = str(exc) or type(exc).__name__
            logger.opt(exception=not isinstance(exc, VikingbotError)).error(
                "channel {} failed to start: {}", name, exc
            )
            return False
        return True

    async def _stop_one(self, name: str) -> None:
        """Stop one channel and give up its lease; it is no longer a way out."""
        self._errors.pop(name, None)
        lead = self._leaders.pop(name, None)
        if lead is not None:
            leader, leading = lead
            leading.cancel()
            await asyncio.gather(leading, return_exceptions=True)
            await leader.release()
        channel = self._channels.pop(name, None)
        if channel is None:
            return
        channel.running = False  # nothing new goes to it while it winds down
        try:
            await channel.stop()
        except Exception:
            logger.exception("channel {} did not stop cleanly", name)
        logger.info("channel {} stopped", name)

    async def apply(self, config: Config) -> list[Applied]:
        """Take the channels to ``config`` without stopping the others (a reload):
        each channel whose section changed is started, stopped or restarted
        (``channels/reconcile.py`` decides); what happened, one row per channel."""
        from vikingbot.channels.reconcile import plan

        running = frozenset(n for n, ch in self._channels.items() if ch.running)
        steps = plan(self.config, config, running)
        self.config = config
        done: list[Applied] = []
        async with self._applying:
            for step in steps:
                if step.action in ("stop", "restart") or step.channel in self._channels:
                    await self._stop_one(step.channel)
                if step.action == "stop":
                    done.append(Applied(step.channel, step.action, True, None))
                    continue
                section = channel_sections(config)[step.channel]
                ok = await self._start_one(step.channel, section)
                done.append(Applied(step.channel, step.action, ok, self._errors.get(step.channel)))
        return done

    async def _lead(self, name: str, channel: Channel) -> None:
        """Receive on ``channel`` only while this gateway holds its lease (leadership.py)."""
        leader = Leadership(
            Leases(self.store, self.clock),
            self.outbox.sender,
            channel_key(name),
            start=channel.start_receiving,
            stop=channel.stop_receiving,
            ttl_s=self.lease_ttl_s,
            check_s=self.lease_check_s,
        )
        await leader.step()  # the first claim now: a lone gateway receives from the start
        if not leader.held:
            logger.info("channel {}: another gateway receives; this one only sends", name)
        task = self._spawn(f"lease:{name}", lambda: self._keep_leading(leader))
        self._leaders[name] = (leader, task)

    @staticmethod
    async def _keep_leading(leader: Leadership) -> None:
        await asyncio.sleep(leader.check_s)
        await leader.run()

    def held(self) -> list[str]:
        """The channels this gateway receives on as the lease holder."""
        return sorted(name for name, (leader, _) in self._leaders.items() if leader.held)

    async def _recover(self) -> int:
        sent = await self._sweep()
        self._sweeper = self._spawn("outbox-sweep", self._sweep_forever)
        return sent

    async def _sweep(self) -> int:
        try:
            return await self.resend_pending()
        except Exception:  # supervisor boundary: the gateway keeps running
            logger.exception("outbox: re-sending pending messages failed")
            return 0

    async def _sweep_forever(self) -> None:
        """Pick up rows a dead gateway (or a failed start-up sweep) left pending."""
        while True:
            await asyncio.sleep(self.outbox_sweep_s)
            await self._sweep()

    async def wait_recovered(self) -> int:
        """Wait until the start-up re-send of pending rows is done; how many were sent."""
        return await self._recovery if self._recovery is not None else 0

    async def stop(self) -> None:
        for leader, leading in self._leaders.values():
            leading.cancel()
            await asyncio.gather(leading, return_exceptions=True)
            await leader.release()  # a task cancelled before run() started holds it still
        self._leaders.clear()
        background: list[asyncio.Task[Any] | None] = [self._recovery, self._sweeper]
        for task in background:
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        for name, channel in reversed(list(self._channels.items())):
            try:
                await channel.stop()
            except Exception:
                logger.exception("channel {} did not stop cleanly", name)
            channel.running = False

    def channel(self, name: str) -> Channel | None:
        return self._channels.get(name)

    async def answering(self, msg: InboundMessage) -> None:
        """Tell ``msg``'s channel a turn on it begins (see :meth:`Channel.answering`)."""
        channel = self._channels.get(msg.channel)
        if channel is not None:
            await channel.answering(msg)

    async def answered(self, msg: InboundMessage) -> None:
        """Tell ``msg``'s channel its reply is with delivery (see :meth:`Channel.answered`)."""
        channel = self._channels.get(msg.channel)
        if channel is not None:
            await channel.answered(msg)

    def routes(self) -> list[Mount]:
        """Each channel's own HTTP routes, mounted at ``/<name>``; they check their own
        credentials, so the gateway leaves ``/<name>/`` open to them. Looked up per
        request (``channels/live_routes.py``): a channel a reload starts serves at once."""
        from starlette.routing import Mount

        from vikingbot.channels.live_routes import LiveRoutes

        names = [*registry.names("channels"), *channel_sections(self.config), *self._channels]
        return [
            Mount(f"/{name}", app=LiveRoutes(self._finder(name))) for name in dict.fromkeys(names)
        ]

    def _finder(self, name: str) -> Callable[[], Channel | None]:
        return lambda: self._channels.get(name)

    def status(self) -> list[dict[str, Any]]:
        """One row per configured channel: name, enabled, running, last_error."""
        rows = []
        for name, section in channel_sections(self.config).items():
            ch = self._channels.get(name)
            rows.append(
                {
                    "name": name,
                    "enabled": section.enabled,
                    "running": bool(ch and ch.running),
                    "receiving": bool(ch and ch.running and ch.receiving),
                    "last_error": (ch.last_error if ch else None) or self._errors.get(name),
                    "failing": ch.loop_error if ch else None,
                }
            )
        return rows

    # ---- outbound --------------------------------------------------------

    async def _outbox_call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a thread; while the state database is away, wait for it.

        A reply written during a database outage is held here and sent when the
        database is back (up to ``store_wait_s``), rather than lost; a message the
        platform took is marked sent once the database answers, so it is not re-sent.
        """
        delay, waited = 0.5, 0.0
        while True:
            try:
                return await asyncio.to_thread(fn, *args)
            except StoreError as exc:
                if waited >= self.store_wait_s:
                    raise
                if waited == 0:
                    logger.warning("outbox: state database unreachable, holding on: {}", exc)
                await asyncio.sleep(delay)
                waited += delay
                delay = min(delay * 2, 5.0)

    @asynccontextmanager
    async def _key_lock(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def send(self, item: Outgoing) -> bool:
        """Send a resolved message exactly once per ``dedupe_key``; True when the platform took it.

        Only an :class:`Outgoing` is accepted (the delivery service made it, after
        the allow-list, owner fallback and audit); anything else is a programming
        error and raises ``TypeError``. A message without a ``dedupe_key`` gets a
        fresh one. A key already marked sent is not sent again (and counts as accepted).
        """
        if not isinstance(item, Outgoing):
            raise TypeError(
                f"the channel manager sends only what the delivery service resolved, "
                f"not {type(item).__name__}"
            )
        msg = item.message
        key = msg.dedupe_key or f"auto:{uuid.uuid4().hex}"
        async with self._key_lock(key):
            row = await self._outbox_call(self.outbox.claim, msg, key)
            if row.status == "sent":
                logger.debug("outbox: {} was already sent; not sending again", key)
                return True
            if not row.mine:
                logger.info("outbox: {} is being sent by another gateway; leaving it", key)
                return True
            return await self._send_row(row)

    async def resend_pending(self) -> int:
        """Send every pending outbox row nobody is sending (left by a crash); how many went out."""
        sent = 0
        ours = list(channel_sections(self.config))  # not e.g. the inbox's bookkeeping rows
        while True:
            rows = await asyncio.to_thread(self.outbox.claim_pending, ours, 100)
            for row in rows:
                async with self._key_lock(row.dedupe_key):
                    sent += await self._resend(row)
            if len(rows) < 100:
                return sent

    async def _resend(self, row: OutboxRow) -> int:
        logger.info("outbox: re-sending {} to {}:{}", row.dedupe_key, row.channel, row.chat_id)
        if not await self._send_row(row, recovering=True):
            return 0
        if self.on_resent is not None:
            try:
                await self.on_resent(row.message())
            except VikingbotError as exc:
                logger.warning("outbox: re-sent {}; afterwards: {}", row.dedupe_key, exc)
        return 1

    async def _send_row(self, row: OutboxRow, *, recovering: bool = False) -> bool:
        """Send a claimed row. A recovered row for a channel that is down stays pending."""
        channel = self._channels.get(row.channel)
        if channel is None or not channel.running:
            why = "not enabled" if channel is None else "not running"
            down = f"channel {row.channel!r} is {why}"
            if recovering:
                logger.warning("outbox: {} stays pending: {}", row.dedupe_key, down)
                return False
            await self._outbox_call(self.outbox.mark_failed, row.dedupe_key, down)
            logger.error(
                "outbox: {} not sent to {}:{}: {}", row.dedupe_key, row.channel, row.chat_id, down
            )
            return False
        if recovering:  # claimed with others by the sweep: marked now, as it goes out
            begun = await self._outbox_call(self.outbox.begin, row)
            if begun is None:
                logger.info("outbox: {} is no longer this gateway's to send", row.dedupe_key)
                return False
            row = begun
        pieces = split_text(row.text, channel.max_message_chars)
        total = len(pieces)
        base = row.message()
        attempts = row.attempts
        for index in range(row.parts_sent, total):
            key = row.dedupe_key if total == 1 else f"{row.dedupe_key}:{index + 1}/{total}"
            piece = replace(base, text=pieces[index], dedupe_key=key)
            doubt = index == row.parts_sent and row.possibly_sent
            if doubt and await self._arrived(channel, row, piece, index, total):
                if total > 1:
                    await self._outbox_call(self.outbox.part_sent, row, index + 1)
                continue
            tried, error = await self._send_with_retries(channel, piece)
            attempts += tried
            if error is not None:
                channel.last_error = str(error)
                await self._outbox_call(
                    self.outbox.mark_failed, row.dedupe_key, str(error), attempts
                )
                logger.error(
                    "outbox: {} not sent to {}:{}: {}",
                    row.dedupe_key,
                    row.channel,
                    row.chat_id,
                    error,
                )
                return False
            if total > 1:
                await self._outbox_call(self.outbox.part_sent, row, index + 1)
        await self._outbox_call(self.outbox.mark_sent, row.dedupe_key, attempts)
        return True

    async def _arrived(
        self, channel: Channel, row: OutboxRow, piece: OutboundMessage, index: int, total: int
    ) -> bool:
        """A possibly sent piece (its sender died mid-send): True when the channel can
        show it arrived (then it is not sent again); otherwise it is sent again, with a
        warning and a count (at least once: a lost message is worse than a repeat)."""
        where = f"{row.channel}:{row.chat_id}"
        part = f" (part {index + 1}/{total})" if total > 1 else ""
        if channel.idempotent_send:
            self.metrics["resent_after_crash_total"] += 1
            logger.info(
                "outbox: {}{} was in flight when its sender stopped; sending it again with the "
                "same key, which {} keeps once",
                row.dedupe_key,
                part,
                where,
            )
            return False
        try:
            found = await channel.arrived(piece, since=row.created_at)
        except Exception as exc:  # asking is best effort: send again
            logger.warning(
                "outbox: could not ask {} whether {} arrived: {}", where, piece.dedupe_key, exc
            )
            found = None
        if found:
            self.metrics["found_after_crash_total"] += 1
            logger.info(
                "outbox: {}{} was in flight when its sender stopped and {} shows it arrived; "
                "not sent again",
                row.dedupe_key,
                part,
                where,
            )
            return True
        self.metrics["resent_after_crash_total"] += 1
        logger.warning(
            "outbox: {}{} may already be in {}: its sender stopped while sending it, before "
            "recording the result; sending it again (chat platforms have no idempotency key)",
            row.dedupe_key,
            part,
            where,
        )
        return False

    @property
    def _retries(self) -> int:
        return self.config.bot.channels.send_retries

    async def _send_with_retries(
        self, channel: Channel, msg: OutboundMessage
    ) -> tuple[int, ChannelError | None]:
        """Send one piece, retrying with backoff: (attempts made, the last error or None).

        tenacity schedules the attempts: the delay starts at ``retry_delay_s`` and
        doubles (capped at 30 s) plus up to one first delay of jitter; a
        :class:`ChannelBusy` waits what the platform asked; a :class:`ChannelRejected`
        is not retried.
        """
        tries = 1 + self._retries
        backoff = wait_exponential(multiplier=self.retry_delay_s, max=MAX_BACKOFF_S) + wait_random(
            0, self.retry_delay_s
        )

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome is not None else None
            if isinstance(exc, ChannelBusy) and exc.retry_after is not None:
                return min(max(exc.retry_after, 0.0), MAX_BACKOFF_S)
            return float(backoff(state))

        def warn(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            delay = state.next_action.sleep if state.next_action is not None else 0.0
            logger.warning(
                "channel {}: send to {} failed ({}); retry {}/{} in {:.2f}s",
                channel.name,
                msg.chat_id,
                exc,
                state.attempt_number,
                tries - 1,
                delay,
            )

        made = 0
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(tries),
                wait=wait,
                retry=retry_if_exception(_retryable),
                before_sleep=warn,
                reraise=True,
            ):
                with attempt:
                    made = attempt.retry_state.attempt_number
                    await self._send_once(channel, msg)
        except ChannelError as exc:
            return made, exc
        return made, None

    async def _send_once(self, channel: Channel, msg: OutboundMessage) -> None:
        try:
            await channel.send(msg)
        except ChannelError:
            raise
        except Exception as exc:  # a channel bug must not take the manager down
            logger.exception("channel {} raised an unexpected error", channel.name)
            raise ChannelError(f"channel {channel.name!r} failed: {exc}") from exc


def _retryable(exc: BaseException) -> bool:
    """Channel errors are retried, refusals are not."""
    return isinstance(exc, ChannelError) and not isinstance(exc, ChannelRejected)
