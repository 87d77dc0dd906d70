"""What every agent loop shares about a turn: the lock, the timeout, history and the no-op rule.

``run_locked(...)`` holds the session's turn lock for the whole turn (a user
turn and a background turn never interleave on one session), bounds it by
``metadata["timeout_s"]`` or ``bot.agents.turn_timeout_s`` and writes the
turn's messages to the session in one append at the end:

- a heartbeat turn is written only when it ends with a reply that is not a
  no-op (``vikingbot.replies.is_noop``), so ``HEARTBEAT_OK`` turns leave no
  trace; background turns carry ``{"heartbeat": true}`` so they never make a
  session fresh;
- an interactive turn that fails, times out or is cancelled keeps its prompt
  and the steps that completed (nothing the user wrote is lost);
- a reply longer than ``bot.agents.max_reply_chars`` is cut, and says so.

A loop fills a ``TurnLog`` (``user``, ``step``, ``reply``, ``result``) and
returns; the rest is here.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.agent.types import TurnResult
from vikingbot.agentio import running_turn
from vikingbot.providers.base import ImagePart
from vikingbot.replies import is_noop
from vikingbot.session.types import Message, SessionKey
from vikingbot.tools.base import is_unattended

if TYPE_CHECKING:
    from loguru import Logger

    from vikingbot.clock import Clock
    from vikingbot.config.schema import Config
    from vikingbot.session.store import SessionStore

CUT_NOTE = "\n\n[reply cut here: {n} more characters were not kept (bot.agents.max_reply_chars)]"


@dataclass
class TurnLog:
    """One turn's bookkeeping, filled by the loop, written by ``run_locked``."""

    key: SessionKey
    metadata: dict[str, Any]
    clock: Clock
    max_reply_chars: int
    turn_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    result: TurnResult = field(default_factory=lambda: TurnResult(text=None))
    writes: list[Message] = field(default_factory=list)  # kept even if the turn fails
    final: list[Message] = field(default_factory=list)  # kept only if it completes
    written: int = 0  # messages appended to the session at the end
    written_at: datetime | None = None  # the session's updated_at after that append
    log: Logger = field(init=False)

    def __post_init__(self) -> None:
        self.log = logger.bind(session=str(self.key))

    @property
    def background(self) -> bool:
        return is_unattended(self.metadata)

    def message_meta(self) -> dict[str, Any]:
        """Metadata every message of this turn carries in the session."""
        meta: dict[str, Any] = {}
        if self.background:
            meta["heartbeat"] = True
        for k in ("run_id", "entry"):
            if self.metadata.get(k):
                meta[k] = self.metadata[k]
        return meta

    def message(self, role: str, content: str, **extra: Any) -> Message:
        meta = {**self.message_meta(), **extra.pop("metadata", {})}
        return Message(role, content, self.clock.now(), metadata=meta, **extra)

    def user(self, prompt: str) -> None:
        """The prompt: written whatever becomes of the turn."""
        self.writes.append(self.message("user", prompt))

    def step(self, *messages: Message) -> None:
        """Completed intermediate steps (tool calls and their results)."""
        self.writes.extend(messages)

    def reply(self, text: str, *, usage: dict[str, int] | None = None) -> None:
        """The final reply (capped); written when the turn completes."""
        text = cap_reply(text, self.max_reply_chars)
        self.result.text = text
        extra: dict[str, Any] = {"usage": usage} if usage else {}
        self.final = [self.message("assistant", text, **extra)]

    def fail(self, error: str) -> None:
        self.result.ended = "error"
        self.result.error = error
        self.result.text = None


def cap_reply(text: str, cap: int) -> str:
    """``text`` cut at ``cap`` characters with a note saying how much was dropped. Pure."""
    if len(text) <= cap:
        return text
    return text[:cap] + CUT_NOTE.format(n=len(text) - cap)


def to_key(session_key: SessionKey | str) -> SessionKey:
    return session_key if isinstance(session_key, SessionKey) else SessionKey.parse(session_key)


async def run_locked(
    config: Config,
    sessions: SessionStore,
    clock: Clock,
    key: SessionKey,
    metadata: dict[str, Any],
    body: Callable[[TurnLog], Awaitable[None]],
    *,
    on_timeout: Callable[[TurnLog], Awaitable[None]] | None = None,
) -> TurnResult:
    """Run ``body`` as one turn of ``key``: locked, bounded, its history written.

    ``on_timeout`` runs after the turn timed out (e.g. to tell an agent process
    to stop); cancelling the caller cancels ``body`` and keeps the prompt.
    """
    agents = config.bot.agents
    turn = TurnLog(key, metadata, clock, agents.max_reply_chars)
    log = turn.log
    raw = metadata.get("timeout_s")
    timeout = float(raw) if raw else agents.turn_timeout_s
    async with sessions.turn_lock(key):
        with running_turn(turn.turn_id, timeout):
            await _timed(config, sessions, turn, timeout, body, on_timeout)
    r = turn.result
    log.info(
        "turn {} ended {}: {} model calls, {} tools, {}+{} tokens",
        turn.turn_id,
        r.ended,
        r.model_calls,
        len(r.tool_calls),
        r.tokens_in,
        r.tokens_out,
    )
    return r


async def _timed(
    config: Config,
    sessions: SessionStore,
    turn: TurnLog,
    timeout: float,
    body: Callable[[TurnLog], Awaitable[None]],
    on_timeout: Callable[[TurnLog], Awaitable[None]] | None,
) -> None:
    log = turn.log
    log.info("turn {} started ({})", turn.turn_id, "background" if turn.background else "chat")
    try:
        async with asyncio.timeout(timeout or None):
            await body(turn)
    except TimeoutError:
        turn.result.ended = "timeout"
        turn.result.error = f"the turn did not finish within {timeout:g}s"
        turn.result.text = None
        log.warning("turn {} timed out after {}s", turn.turn_id, timeout)
        if on_timeout is not None:
            await on_timeout(turn)
    except asyncio.CancelledError:
        log.info("turn {} cancelled", turn.turn_id)
        # the prompt is kept even now; the write (fsync'd) runs off the event loop
        await asyncio.shield(asyncio.to_thread(write, config, sessions, turn, cancelled=True))
        raise
    await asyncio.to_thread(write, config, sessions, turn)


def write(
    config: Config, sessions: SessionStore, turn: TurnLog, *, cancelled: bool = False
) -> None:
    """Apply the history rules (module docstring) and append the turn in one write."""
    result = turn.result
    if result.messages_sent:
        result.wrote = True
    completed = not cancelled and result.ended in ("final", "turn-limit")
    if turn.background:
        ack = config.bot.heartbeat.ack_max_chars
        if not completed or (turn.metadata.get("heartbeat") and is_noop(result.text, ack)):
            turn.log.debug("turn {}: nothing written to history", turn.turn_id)
            return
    messages = turn.writes + (turn.final if completed else [])
    if messages:
        meta = sessions.append(turn.key, *messages)
        turn.written, turn.written_at = len(messages), meta.updated_at


def take_images(meta: dict[str, Any]) -> list[ImagePart]:
    """The pictures a person sent with the prompt (metadata ``images``, taken out of it so
    nothing else sees the bytes); none for a turn nobody watches (unattended turns stay
    text-only), unless they are pictures a heartbeat entry names in its own workspace
    (``workspace_images``, set by the heartbeat after ``media.workspace_images`` checked
    each path)."""
    given = meta.pop("images", None) or []
    from_workspace = meta.pop("workspace_images", False) is True
    if is_unattended(meta) and not from_workspace:
        return []
    return [i for i in given if isinstance(i, ImagePart)]
