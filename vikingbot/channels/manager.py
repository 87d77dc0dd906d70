"""The channel manager: starts the enabled channels and sends every outbound message.

It is the bus's outbound handler. Each message goes through the outbox (see
:mod:`vikingbot.delivery.outbox`): written as pending, split to the channel's
limit, sent piece by piece with retries and backoff, marked sent. On start it
re-sends whatever a previous run left pending.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot import registry
from vikingbot.bus import MessageBus, OutboundMessage
from vikingbot.channels.base import Channel, ChannelBusy, ChannelRejected
from vikingbot.channels.owner import channel_sections, owner_chat_for
from vikingbot.channels.text import split_text
from vikingbot.clock import Clock, SystemClock
from vikingbot.config.schema import Config
from vikingbot.errors import ChannelError, VikingbotError

if TYPE_CHECKING:
    from vikingbot.delivery.outbox import OutboxRow
    from vikingbot.store.db import StateStore

MAX_BACKOFF_S = 30.0


class ChannelManager:
    """Owns the channel instances of one gateway (or one ``chat`` session).

    ``retry_delay_s`` is the first backoff between send attempts; it doubles
    per attempt (capped at 30 s). The number of retries is
    ``bot.channels.send_retries``. ``on_resent`` is awaited with each message
    that a previous run left pending and this one sent (the gateway records it
    in the chat's history, as a delivery that did not crash would have).
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
    ) -> None:
        from vikingbot.delivery.outbox import Outbox

        self.config = config
        self.bus = bus
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.retry_delay_s = retry_delay_s
        self.on_resent = on_resent
        self.outbox = Outbox(store, self.clock)
        self._channels: dict[str, Channel] = {}
        self._errors: dict[str, str] = {}
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._recovery: asyncio.Task[int] | None = None

    # ---- lifecycle -------------------------------------------------------

    async def start(self) -> None:
        """Start every enabled channel (a failing one is logged, the rest go on).

        Becomes the bus's outbound handler, then re-sends pending outbox rows
        in the background (:meth:`wait_recovered` waits for that).
        """
        for name, section in channel_sections(self.config).items():
            if not section.enabled:
                continue
            try:
                cls = registry.load("channels", name)
                channel: Channel = cls(
                    section,
                    owner_chat=owner_chat_for(self.config, name),
                    store=self.store,
                    clock=self.clock,
                )
                self._channels[name] = channel
                await channel.start(self.bus)
                channel.running = True
                logger.info("channel {} started", name)
            except Exception as exc:
                self._errors[name] = str(exc) or type(exc).__name__
                logger.opt(exception=not isinstance(exc, VikingbotError)).error(
                    "channel {} failed to start: {}", name, exc
                )
        self.bus.set_outbound_handler(self.deliver_outbound)
        self._recovery = asyncio.create_task(self._recover(), name="outbox-recovery")

    async def _recover(self) -> int:
        try:
            return await self.resend_pending()
        except Exception:  # supervisor boundary: the gateway keeps running
            logger.exception("outbox: re-sending pending messages failed")
            return 0

    async def wait_recovered(self) -> int:
        """Wait until the start-up re-send of pending rows is done; how many were sent."""
        return await self._recovery if self._recovery is not None else 0

    async def stop(self) -> None:
        if self._recovery is not None and not self._recovery.done():
            self._recovery.cancel()
            await asyncio.gather(self._recovery, return_exceptions=True)
        for name, channel in reversed(list(self._channels.items())):
            try:
                await channel.stop()
            except Exception:
                logger.exception("channel {} did not stop cleanly", name)
            channel.running = False
        self.bus.set_outbound_handler(None)

    def channel(self, name: str) -> Channel | None:
        return self._channels.get(name)

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
                    "last_error": (ch.last_error if ch else None) or self._errors.get(name),
                }
            )
        return rows

    # ---- outbound --------------------------------------------------------

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

    async def deliver_outbound(self, msg: OutboundMessage) -> bool:
        """Send ``msg`` exactly once per ``dedupe_key``; True when the platform took it.

        A message without a ``dedupe_key`` gets a fresh one. A key already
        marked sent is not sent again (and counts as accepted).
        """
        key = msg.dedupe_key or f"auto:{uuid.uuid4().hex}"
        async with self._key_lock(key):
            row = await asyncio.to_thread(self.outbox.claim, msg, key)
            if row.status == "sent":
                logger.debug("outbox: {} was already sent; not sending again", key)
                return True
            return await self._send_row(row)

    async def resend_pending(self) -> int:
        """Send every pending outbox row (left by a crash); how many went out."""
        sent = 0
        ours = channel_sections(self.config)
        for row in await asyncio.to_thread(self.outbox.pending):
            if row.channel not in ours:  # e.g. inbox bookkeeping rows of the delivery service
                continue
            async with self._key_lock(row.dedupe_key):
                current = await asyncio.to_thread(self.outbox.get, row.dedupe_key)
                if current is None or current.status != "pending":
                    continue
                logger.info(
                    "outbox: re-sending {} to {}:{}", row.dedupe_key, row.channel, row.chat_id
                )
                if await self._send_row(current, recovering=True):
                    sent += 1
                    if self.on_resent is not None:
                        try:
                            await self.on_resent(current.message())
                        except VikingbotError as exc:
                            logger.warning(
                                "outbox: re-sent {}; afterwards: {}", row.dedupe_key, exc
                            )
        return sent

    async def _send_row(self, row: OutboxRow, *, recovering: bool = False) -> bool:
        """Send a claimed row. A recovered row for a channel that is down stays pending."""
        channel = self._channels.get(row.channel)
        if channel is None or not channel.running:
            why = "not enabled" if channel is None else "not running"
            down = f"channel {row.channel!r} is {why}"
            if recovering:
                logger.warning("outbox: {} stays pending: {}", row.dedupe_key, down)
                return False
            await asyncio.to_thread(self.outbox.mark_failed, row.dedupe_key, down)
            logger.error(
                "outbox: {} not sent to {}:{}: {}", row.dedupe_key, row.channel, row.chat_id, down
            )
            return False
        pieces = split_text(row.text, channel.max_message_chars)
        total = len(pieces)
        base = row.message()
        attempts = row.attempts
        for index in range(row.parts_sent, total):
            key = row.dedupe_key if total == 1 else f"{row.dedupe_key}:{index + 1}/{total}"
            piece = replace(base, text=pieces[index], dedupe_key=key)
            tried, error = await self._send_with_retries(channel, piece)
            attempts += tried
            if error is not None:
                channel.last_error = str(error)
                await asyncio.to_thread(
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
                await asyncio.to_thread(self.outbox.part_sent, row, index + 1)
        await asyncio.to_thread(self.outbox.mark_sent, row.dedupe_key, attempts)
        return True

    @property
    def _retries(self) -> int:
        return self.config.bot.channels.send_retries

    async def _send_with_retries(
        self, channel: Channel, msg: OutboundMessage
    ) -> tuple[int, ChannelError | None]:
        """Send one piece, retrying with backoff: (attempts made, the last error or None).

        stamina (``vikingbot.retries``) schedules the attempts: the delay starts at
        ``retry_delay_s`` and doubles (capped, jittered by up to one first delay); a
        :class:`ChannelBusy` waits what the platform asked; a :class:`ChannelRejected`
        is not retried.
        """
        from vikingbot.retries import retry_context

        tries = 1 + self._retries
        made = 0
        try:
            async for attempt in retry_context(
                on=_retry_hook,
                attempts=tries,
                timeout=None,
                wait_initial=self.retry_delay_s,
                wait_max=MAX_BACKOFF_S,
                wait_jitter=self.retry_delay_s,
            ):
                with attempt:
                    made = attempt.num
                    await self._send_once(channel, msg, made, tries, attempt.next_wait)
        except ChannelError as exc:
            return made, exc
        return made, None

    async def _send_once(
        self, channel: Channel, msg: OutboundMessage, num: int, tries: int, next_wait: float
    ) -> None:
        try:
            await channel.send(msg)
            return
        except ChannelError as exc:
            error = exc
        except Exception as exc:  # a channel bug must not take the manager down
            logger.exception("channel {} raised an unexpected error", channel.name)
            error = ChannelError(f"channel {channel.name!r} failed: {exc}")
        if num < tries and _retry_hook(error) is not False:
            hook = _retry_hook(error)
            delay = next_wait if hook is True else float(hook)
            logger.warning(
                "channel {}: send to {} failed ({}); retry {}/{} in {:.2f}s",
                channel.name,
                msg.chat_id,
                error,
                num,
                tries - 1,
                delay,
            )
        raise error


def _retry_hook(exc: Exception) -> bool | float:
    """stamina's ``on``: retry channel errors, not refusals; honour ``retry_after``."""
    if isinstance(exc, ChannelRejected) or not isinstance(exc, ChannelError):
        return False
    if isinstance(exc, ChannelBusy) and exc.retry_after is not None:
        return min(max(exc.retry_after, 0.0), MAX_BACKOFF_S)
    return True
