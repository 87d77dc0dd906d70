"""A reply shown while the model writes it: one message edited in place, paced.

:class:`LiveReply` is the turn's ``TextSink`` (``agent.streaming``) for a chat whose
channel can edit (``Channel.edit_every_s``) and whose section has
``stream_replies`` on. The first text is shown at once; later text at most once
per ``edit_every_s`` (Telegram: 1 s, Slack: 1.2 s, Discord: 1.5 s, Feishu and Matrix:
2 s), so a reply stays under the platform's edit limits however fast the model writes. A 429 is waited out. The
final reply is not sent from here: the dispatcher delivers it through the outbox as
always, and the channel's ``send`` turns the preview into it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from loguru import logger

from vikingbot.errors import ChannelBusy, VikingbotError

if TYPE_CHECKING:
    from vikingbot.channels.base import Channel

CLOSE_WAIT_S = 10.0


class LiveReply:
    """The growing text of one chat turn, shown by ``channel.draft``."""

    def __init__(self, channel: Channel, chat_id: str, thread: str | None, every_s: float) -> None:
        self.channel = channel
        self.chat_id = chat_id
        self.thread = thread
        self.every_s = every_s
        self.text = ""
        self._shown = ""
        self._dirty = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    def begin(self) -> None:
        self.text = ""

    def delta(self, text: str) -> None:
        self.text += text
        self._dirty.set()
        if self._task is None and not self._closing:
            self._task = asyncio.create_task(self._show(), name=f"live:{self.chat_id}")

    def tool(self, name: str) -> None:
        """A short line while a tool runs (the next model call's text replaces it)."""
        self.delta(f"\n⏳ {name}…" if self.text.strip() else f"⏳ {name}…")

    def _capped(self) -> str:
        limit = self.channel.max_message_chars
        text = self.text
        return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"

    async def _show(self) -> None:
        while not self._closing:
            await self._dirty.wait()
            self._dirty.clear()
            if self._closing:
                return
            text = self._capped()
            if text.strip() and text != self._shown:
                try:
                    await self.channel.draft(self.chat_id, self.thread, text)
                except ChannelBusy as exc:  # wait it out, then show the newest text
                    await asyncio.sleep(min(30.0, exc.retry_after or self.every_s))
                    self._dirty.set()
                    continue
                except VikingbotError as exc:  # only a preview: the reply still comes
                    logger.info("live reply in {}: {}", self.chat_id, exc)
                    return
                self._shown = text
            await asyncio.sleep(self.every_s)

    async def close(self) -> None:
        """Stop editing; an edit on its way is let finish, so none lands after the reply."""
        self._closing = True
        self._dirty.set()
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=CLOSE_WAIT_S)
        if not done:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
