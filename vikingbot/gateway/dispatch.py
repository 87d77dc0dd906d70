"""Turns the gateway starts for people: chat messages, dashboard prompts, control-API chat.

Each turn gets its deliverer from the delivery service (``vikingbot.delivery.adapter``),
so whatever the agent sends (the ``message`` tool, any target it picks) is resolved
and checked there; the final reply of a chat turn goes back to its own chat.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from loguru import logger

from vikingbot.agent.dispatch import TurnText, run_turn_text, turn_json
from vikingbot.agent.types import TurnResult
from vikingbot.bus import InboundMessage
from vikingbot.channels.base import PAIRING
from vikingbot.channels.inbound import apology, gave_up
from vikingbot.clock import wait_event
from vikingbot.delivery.adapter import TurnDelivery
from vikingbot.delivery.inbox import Inbox
from vikingbot.errors import StoreError
from vikingbot.session.types import SessionKey

if TYPE_CHECKING:
    from vikingbot.agent.types import AgentLoop
    from vikingbot.bus import Attachment, MessageBus
    from vikingbot.clock import Clock
    from vikingbot.delivery.service import DeliveryService
    from vikingbot.gateway.steering import Steering
    from vikingbot.media import MediaIntake, Taken
    from vikingbot.session.store import SessionStore
    from vikingbot.store.db import StateStore


class FilesIn(NamedTuple):
    """A message's files, taken in: what the turn is asked, its metadata, what to tell."""

    prompt: str
    meta: dict[str, Any]
    notices: list[str]


def media_meta_of(taken: Taken) -> dict[str, Any]:
    """The turn metadata a message's files add: the images to show, ``via: audio``."""
    meta: dict[str, Any] = {"images": taken.images} if taken.images else {}
    if taken.transcript is not None:
        meta["via"] = "audio"
    return meta


class Dispatcher:
    """Answers chats and dashboard prompts (built by the gateway's composition root)."""

    def __init__(
        self,
        *,
        agent: Callable[[], AgentLoop],
        agent_problem: Callable[[], str | None],
        delivery: DeliveryService,
        sessions: SessionStore,
        store: StateStore,
        clock: Clock,
        media: MediaIntake | None = None,
        workspace_for: Callable[[SessionKey], Path] | None = None,
        steering: Steering | None = None,
    ) -> None:
        self.agent = agent
        self.media = media
        self.workspace_for = workspace_for
        self.steering = steering  # commands, approvals in the chat, /stop, typing
        self.agent_problem = agent_problem
        self.delivery = delivery
        self.sessions = sessions
        self.inbox = Inbox(store, clock)
        self.inflight: set[asyncio.Task[Any]] = set()  # chat turns running now

    async def serve_inbound(
        self,
        bus: MessageBus,
        stop: asyncio.Event,
        *,
        answering: Callable[[InboundMessage], Awaitable[None]] | None = None,
        answered: Callable[[InboundMessage], Awaitable[None]] | None = None,
        max_parallel: int = 8,
    ) -> None:
        """Answer chat messages from the bus until ``stop``: chats run in parallel, one
        turn at a time per session (the loop's session lock), at most ``max_parallel``
        turns at once. Turns already running are waited for (the gateway's stop bounds
        that with its grace period).

        ``answering(msg)`` runs as a message's turn begins (a kept webhook message counts
        its tries); ``answered(msg)`` runs once a message's turn is done and its reply is with
        delivery (the channel manager's, so a kept webhook message is not answered
        again after a restart); not after a failed turn."""
        sem = asyncio.Semaphore(max_parallel)
        while not stop.is_set():
            get = asyncio.create_task(bus.next_inbound())
            stopped = asyncio.create_task(stop.wait())
            done, _ = await asyncio.wait({get, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if get not in done:
                get.cancel()
                break
            stopped.cancel()
            msg = get.result()

            async def answer(msg: InboundMessage = msg) -> None:
                async with sem:
                    try:
                        if answering is not None:
                            await answering(msg)
                        await self.answer(msg)
                    except Exception:
                        logger.exception("answering {}:{} failed", msg.channel, msg.chat_id)
                        return
                    if answered is not None:  # a kept message is not answered again
                        await answered(msg)

            task = asyncio.create_task(answer(), name=f"inbound:{msg.channel}:{msg.chat_id}")
            self.inflight.add(task)
            task.add_done_callback(self.inflight.discard)
        if self.inflight:
            await asyncio.wait(set(self.inflight))

    def _agent_or_none(self) -> AgentLoop | None:
        return None if self.agent_problem() else self.agent()

    async def answer(self, msg: InboundMessage) -> None:
        """One chat message in, the agent's reply back to the same chat."""
        key = SessionKey(msg.channel, msg.channel_id, msg.chat_id)
        run_id = msg.metadata.get("run_id") or f"chat-{uuid.uuid4().hex}"
        steering = self.steering
        if steering is not None:  # first, before any wait: a chat's commands keep their order

            async def reply(text: str) -> Any:
                return await self.delivery.reply(
                    key, text, thread=msg.thread, dedupe_key=f"{run_id}:command"
                )

            if await steering.intercept(msg, key, reply):  # never reaches the model
                return
        elif msg.metadata.get(PAIRING):  # a stranger's message: never the model
            return
        await asyncio.to_thread(self.sessions.get_or_create, key)
        problem = self.agent_problem()
        reply_to = f"{msg.channel}:{msg.chat_id}:{msg.thread}"  # new cron jobs' default target
        # a kept message (channels/inbound.py) has a run id of its own: answering it again
        # after a crash reuses the replies' dedupe keys, and the outbox sends a key once
        deliver = TurnDelivery.for_chat(self.delivery, key, thread=msg.thread, run_id=run_id)
        tries = gave_up(msg)
        if tries is not None:  # it stopped the bot again and again: do not run it again
            await deliver(apology(msg, tries))
            return
        prompt, media_meta = msg.text, dict[str, Any]()
        if msg.attachments and not problem:
            taken = await self._take_media(msg, key)
            for line in taken.notices:
                await deliver(line)
            prompt, media_meta = taken.prompt(msg.text), media_meta_of(taken)
            if not prompt.strip():  # every file refused and no words: nothing to answer
                return
        meta = {
            "sender": msg.sender_id,
            **({"reply_to": reply_to} if msg.thread else {}),
            **media_meta,
        }

        def turn(meta: dict[str, Any]) -> Awaitable[TurnText]:
            return run_turn_text(
                self._agent_or_none(),
                prompt,
                key,
                meta,
                deliver=deliver,
                problem=f"vikingbot cannot answer yet: {problem}" if problem else None,
                failure="Sorry, that failed: {}",
            )

        out = await (turn(meta) if steering is None else steering.run(msg, key, meta, turn))
        if out is None:  # /stop ended it (its answer said so)
            return
        if problem:
            out.text = f"vikingbot cannot answer yet: {problem}"
        if out.text.strip():
            await deliver(out.text)

    async def _take_media(self, msg: InboundMessage, key: SessionKey) -> Taken:
        """The message's files taken in (``vikingbot.media``); none without an intake."""
        from vikingbot.media import Taken

        if self.media is None or self.workspace_for is None:
            return Taken(notices=["Files are not taken in here; only your words reached me."])
        workspace = await asyncio.to_thread(self.workspace_for, key)
        return await self.media.take(
            msg.attachments,
            workspace=workspace,
            chat=str(key),
            sender=msg.sender_id,
            source=msg.channel,
        )

    async def files_in(
        self, key: SessionKey, text: str, attachments: tuple[Attachment, ...], *, source: str
    ) -> FilesIn:
        """A message's files taken in for a turn in ``key`` (the dashboard's chat): the
        prompt (empty: nothing to answer), the turn metadata and the lines to tell."""
        msg = InboundMessage(
            key.type, key.chat_id, source, text, channel_id=key.channel_id,
            attachments=attachments,
        )  # fmt: skip
        taken = await self._take_media(msg, key)
        return FilesIn(taken.prompt(text), media_meta_of(taken), taken.notices)

    async def chat(
        self, text: str, session: str, attachments: tuple[Attachment, ...] = ()
    ) -> dict[str, Any]:
        """A control-API chat turn in ``session`` (the terminal's, ``cli:default:local``).

        Messages the agent sends to this chat come back in the answer's ``messages``;
        the files sent with it (``vikingbot chat --attach``) are taken in first, as a
        chat platform's are, and what the person is told about them is ``notices``.
        """
        from vikingbot.errors import ConfigError

        key = SessionKey.parse(session)
        await asyncio.to_thread(self.sessions.get_or_create, key, True)
        if self.steering is not None and self.steering.registry.find(text) is not None:
            # the terminal's commands: the same registry as the chats', never the model
            msg = InboundMessage(key.type, key.chat_id, "cli", text, channel_id=key.channel_id)
            answer = await self.steering.command(msg, key, owner=True)
            return {**turn_json(key, TurnResult(answer)), "messages": []}
        problem = self.agent_problem()
        if problem:
            raise ConfigError(problem)
        messages: list[str] = []
        answered = False
        prompt, meta = text, {"sender": "cli"}
        notices: list[str] = []
        if attachments:
            msg = InboundMessage(
                key.type,
                key.chat_id,
                "cli",
                text,
                channel_id=key.channel_id,
                attachments=attachments,
            )
            taken = await self._take_media(msg, key)
            notices = taken.notices
            prompt, meta = taken.prompt(text), {**meta, **media_meta_of(taken)}
            if not prompt.strip():  # every file refused and no words: no turn
                return {**turn_json(key, TurnResult("")), "messages": [], "notices": notices}

        async def to_terminal(text: str) -> Any:
            if answered:  # a sub-agent's late result: the chat's inbox, where `chat` follows
                return await self.delivery.reply(key, text, thread=None, dedupe_key=None)
            messages.append(text)
            return "delivered"

        deliver = TurnDelivery.for_chat(self.delivery, key, sink=to_terminal)
        try:
            result = await self.agent().run_turn(prompt, key, meta, deliver=deliver)
        finally:
            answered = True
        return {**turn_json(key, result), "messages": messages, "notices": notices}

    async def dashboard_prompts(self, stop: asyncio.Event, poll_s: float = 30.0) -> None:
        """`prompt:dashboard:<slot>` results become a turn in that slot's chat.

        Each prompt is taken once (marked read first); the agent's reply lands in the
        same inbox slot. Nobody is watching, so the turn runs under the safe-tools
        policy. A failure is written to the slot too, never dropped.
        """
        while not stop.is_set():
            if await wait_event(stop, poll_s):
                return
            try:
                items = await asyncio.to_thread(self.inbox.items, kind="prompt", limit=20)
            except StoreError as exc:  # the database is away: look again next time
                logger.warning("dashboard prompts: {}", exc)
                continue
            for item in items:
                await asyncio.to_thread(self.inbox.mark_read, [item.id])
                await self.answer_prompt(item.id, item.slot, item.text)

    async def answer_prompt(self, item_id: int, slot: str, text: str) -> None:
        """Run one dashboard prompt; its reply (or failure) goes to the same inbox slot."""
        key = SessionKey("dashboard", "default", slot)
        problem = self.agent_problem()
        run_id = f"dash-{item_id}"
        deliver = TurnDelivery(
            self.delivery, target=f"dashboard:{slot}", run_id=run_id, source="dashboard"
        )
        meta = {"unattended": True, "run_id": run_id, "actor": "dashboard"}
        out = await run_turn_text(
            self._agent_or_none(),
            text,
            key,
            meta,
            deliver=deliver,
            problem=problem,
            failure="(failed: {})",
        )
        if problem:
            out.text = f"(not run: {problem})"
        if out.text.strip():
            await asyncio.to_thread(
                partial(self.inbox.add, slot, out.text, source=f"prompt:{item_id}")
            )
        logger.info("dashboard prompt {} answered in slot {}", item_id, slot)
