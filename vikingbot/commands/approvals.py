"""Questions to a person before a tool runs, asked in the chat the turn serves.

A chat turn whose tool the policy would ask about (``agent.approval``) opens a
:class:`Pending` here: the chat shows the question (buttons, or "reply yes or no"),
and the answer comes back as ``/approve`` or ``/deny`` (a button press is turned
into one by its channel), or a plain "yes"/"no" in the same chat. Only the person
the turn serves, or the owner, may answer; anyone else is refused and audited. No
answer within the timeout denies. Unattended turns never get here: the policy
denies what is not in ``safe_tools`` before anything is asked.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loguru import logger

from vikingbot.errors import VikingbotError
from vikingbot.redact import mask_text

PREVIEW_CHARS = 300
MAX_PENDING = 100  # per process: a flood of asks is refused, not queued

Audit = Callable[[str, str, str, str, str, dict[str, Any]], None]
"""``audit(actor, action, subject, outcome, reason, details)`` (the state store's)."""


def preview(args: dict[str, Any], limit: int = PREVIEW_CHARS) -> str:
    """The arguments as one line a person can read: secrets masked, capped at ``limit``."""
    try:
        text = json.dumps(args, ensure_ascii=False, default=str, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(args)
    text = mask_text(" ".join(text.split()))
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Pending:
    """One question waiting for its answer."""

    id: str
    place: str  # "<channel>:<chat_id>" (or "cli:<session>" for the terminal)
    serves: str  # the sender the turn answers
    tool: str
    preview: str
    future: asyncio.Future[bool] = field(repr=False)
    answered_by: str | None = None

    def question(self) -> str:
        return f"Allow {self.tool}? {self.preview}"


class Approvals:
    """The open questions of one gateway, answered from the chats they were asked in."""

    def __init__(self, audit: Audit | None = None) -> None:
        self.audit = audit
        self._open: dict[str, Pending] = {}

    def open(self, place: str, serves: str, tool: str, args: dict[str, Any]) -> Pending:
        """A new question (raise ``RuntimeError`` when too many wait: the ask then denies)."""
        if len(self._open) >= MAX_PENDING:
            raise RuntimeError("too many approval questions are waiting")
        ident = secrets.token_hex(3)
        while ident in self._open:
            ident = secrets.token_hex(3)
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        pending = Pending(ident, place, serves, tool, preview(args), fut)
        self._open[ident] = pending
        return pending

    def discard(self, pending: Pending) -> None:
        """Forget a question that could not be shown (the ask denies)."""
        self._open.pop(pending.id, None)
        if not pending.future.done():
            pending.future.cancel()

    def waiting_in(self, place: str) -> list[Pending]:
        return [p for p in self._open.values() if p.place == place]

    async def wait(self, pending: Pending, timeout_s: float) -> bool:
        """The answer; no answer within ``timeout_s`` is a no (audited as a timeout)."""
        try:
            return await asyncio.wait_for(asyncio.shield(pending.future), timeout_s)
        except TimeoutError:
            self._record("timeout", pending, pending.serves, "denied", "no answer in time")
            return False
        finally:
            self._open.pop(pending.id, None)
            if not pending.future.done():
                pending.future.cancel()

    def answer(
        self, place: str, sender: str, *, owner: bool, yes: bool, ident: str | None = None
    ) -> str:
        """Apply ``sender``'s answer in ``place`` (to question ``ident``, or the only/newest
        one there); the text to show them."""
        here = self.waiting_in(place)
        if ident:
            here = [p for p in here if p.id == ident.strip().lower()]
        if not here:
            return "Nothing here is waiting for an answer."
        pending = here[-1]
        if sender != pending.serves and not owner:
            self._record("refuse", pending, sender, "refused", "not the person asked nor the owner")
            return "Only the person this turn answers (or the owner) can answer this question."
        if pending.future.done():
            return "That question was already answered."
        pending.answered_by = sender
        pending.future.set_result(yes)
        verdict = "approved" if yes else "denied"
        self._record("answer", pending, sender, verdict, f"answered in {place}")
        return f"{'Approved' if yes else 'Denied'}: {pending.tool}"

    def _record(self, what: str, p: Pending, who: str, outcome: str, reason: str) -> None:
        logger.info("approval {} of {} in {} by {}: {}", p.id, p.tool, p.place, who, outcome)
        if self.audit is None:
            return
        details = {"id": p.id, "place": p.place, "serves": p.serves, "arguments": p.preview}
        try:
            self.audit(f"chat:{who}"[:200], f"approval.{what}", p.tool, outcome, reason, details)
        except (VikingbotError, OSError) as exc:  # the answer stands; the log line keeps it
            logger.error("could not audit approval {}: {}", p.id, exc)
