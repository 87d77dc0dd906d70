"""The gateway's side of pairing (``commands/pairing.py``): a stranger's message becomes a
code, and an approval adds them to the running channel and the config file at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.commands.pairing import CODE_TTL, PairingBook, add_to_allow_from
from vikingbot.errors import VikingbotError

if TYPE_CHECKING:
    from vikingbot.bus import InboundMessage
    from vikingbot.channels.base import Channel


class PairingDesk:
    """Codes for strangers, approvals by the owner (chat, CLI through the control API)."""

    def __init__(
        self,
        book: PairingBook,
        config_file: Path,
        *,
        audit: Callable[..., None] | None,
        channel_of: Callable[[str], Channel | None],
    ) -> None:
        self.book = book
        self.config_file = config_file
        self.audit = audit
        self.channel_of = channel_of

    def _record(self, action: str, who: str, outcome: str, details: dict[str, Any]) -> None:
        logger.info("pairing {} for {}: {}", action, who, outcome)
        if self.audit is not None:
            with contextlib.suppress(VikingbotError, OSError):
                self.audit(f"pairing:{who}"[:200], f"pairing.{action}", who, outcome, None, details)

    async def stranger(self, msg: InboundMessage, reply: Callable[[str], Awaitable[Any]]) -> None:
        """A stranger wrote: their code (a new one, or the one they have), or silence when
        they asked too often."""
        now = datetime.now(UTC)
        outcome, req = await asyncio.to_thread(
            self.book.request, msg.channel, msg.sender_id, msg.chat_id, now
        )
        who = f"{msg.channel}:{msg.sender_id}"
        self._record("request", who, outcome, {"chat_id": msg.chat_id})
        if req is None or outcome in ("limited", "full"):
            return
        hours = int(CODE_TTL.total_seconds() // 3600)
        await reply(
            f"This bot talks only to people its owner let in. Your pairing code: {req.code}\n"
            f"Ask the owner to approve it (valid for {hours} h)."
        )

    async def act(self, verb: str, code: str) -> dict[str, Any]:
        """``list``, ``approve CODE`` or ``deny CODE``; a dict for the API and the CLI."""
        now = datetime.now(UTC)
        if verb == "list":
            rows = await asyncio.to_thread(self.book.pending, now)
            return {"pending": [r.__dict__ for r in rows]}
        req = await asyncio.to_thread(self.book.take, code, now)
        if req is None:
            return {"ok": False, "error": f"no pending code {code[:20]!r} (unknown or expired)"}
        who = f"{req.channel}:{req.sender_id}"
        if verb == "deny":
            self._record("deny", who, "denied", {"code": req.code})
            return {"ok": True, "denied": who}
        await asyncio.to_thread(add_to_allow_from, self.config_file, req.channel, req.sender_id)
        channel = self.channel_of(req.channel)
        live = channel is not None
        if channel is not None and req.sender_id not in channel.config.allow_from:
            channel.config.allow_from.append(req.sender_id)  # applied now, not at a restart
        self._record("approve", who, "approved", {"code": req.code, "live": live})
        return {"ok": True, "approved": who, "chat_id": req.chat_id, "applied": live}

    async def as_text(self, channel: str, verb: str, code: str) -> str:
        """The owner's ``/pair`` in a chat (``channel`` is where they typed it)."""
        data = await self.act(verb, code)
        if verb == "list":
            rows = data["pending"]
            if not rows:
                return "No pairing requests are waiting."
            return "\n".join(
                f"{r['code']}: {r['channel']} {r['sender_id']} (until {r['expires_at'][:16]})"
                for r in rows
            )
        if not data.get("ok"):
            return str(data.get("error"))
        if verb == "deny":
            return f"Denied {data['denied']}."
        return f"Let {data['approved']} in: added to allow_from (applied now)."
