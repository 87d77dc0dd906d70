"""May this tool call run? The approval policy, and the audit trail of every answer.

Interactive turns (someone is present):
  1. ``bot.tools.auto_deny`` matches -> deny;
  2. ``bot.tools.auto_approve`` matches -> approve;
  3. the tool declares itself read-only -> approve;
  4. otherwise ask the person through the ``ApprovalCallback``; with no
     callback (nobody can be asked, e.g. a chat platform) -> deny.

Unattended turns (``metadata["unattended"]`` or ``metadata["heartbeat"]``;
heartbeat and cron), heartbeat spec section 6:
  1. ``bot.tools.auto_deny`` matches -> deny;
  2. the name matches an entry of ``bot.heartbeat.safe_tools`` -> approve;
  3. otherwise deny. ``auto_approve`` is ignored and so is the tool's own
     read-only flag; nothing is guessed from a name's verb or prefix.

Matching is by exact name. ``*`` matches every tool in ``auto_approve`` and
``auto_deny`` only, never in ``safe_tools``. An entry written out as
``mcp__<server>__*`` matches every tool of that one MCP server
(``mcp__<server>__<tool>``) in all three lists; no other wildcard exists.

Every decision is written to the audit table (``tool.approve`` / ``tool.deny``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from loguru import logger

from vikingbot.errors import StoreError

if TYPE_CHECKING:
    from vikingbot.agent.types import ApprovalCallback
    from vikingbot.config.schema import Config

Outcome = Literal["approve", "deny", "ask"]

_MCP_SERVER_WILDCARD = re.compile(r"^mcp__(?:(?!__)[A-Za-z0-9_.-])+__\*$")


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: str
    entry: str | None = None  # the list entry that decided, if any

    @property
    def approved(self) -> bool:
        return self.outcome == "approve"


def entry_matches(entry: str, name: str, *, star: bool) -> bool:
    """Does one list entry cover the tool ``name``? Pure."""
    entry = entry.strip()
    if entry == name:
        return True
    if entry == "*":
        return star
    if _MCP_SERVER_WILDCARD.match(entry):
        prefix = entry[:-1]
        return name.startswith(prefix) and len(name) > len(prefix)
    return False


def first_match(entries: list[str], name: str, *, star: bool) -> str | None:
    return next((e for e in entries if entry_matches(e, name, star=star)), None)


def decide(config: Config, name: str, *, read_only: bool, unattended: bool) -> Decision:
    """The policy, without I/O: approve, deny, or ask the person."""
    tools = config.bot.tools
    hit = first_match(tools.auto_deny, name, star=True)
    if hit is not None:
        return Decision("deny", f"{name} is denied by bot.tools.auto_deny ({hit!r})", hit)
    if unattended:
        hit = first_match(config.bot.heartbeat.safe_tools, name, star=False)
        if hit is not None:
            return Decision("approve", f"{name} is in bot.heartbeat.safe_tools", hit)
        return Decision(
            "deny",
            f"{name} is not in bot.heartbeat.safe_tools; unattended turns (heartbeat, cron) "
            "run only the tools listed there",
        )
    hit = first_match(tools.auto_approve, name, star=True)
    if hit is not None:
        return Decision("approve", f"{name} is approved by bot.tools.auto_approve ({hit!r})", hit)
    if read_only:
        return Decision("approve", f"{name} is a read-only tool")
    return Decision("ask", f"{name} changes things and needs approval")


def actor_of(metadata: dict[str, Any]) -> str:
    """Who a turn acts for, as the audit log names it."""
    if metadata.get("actor"):
        return str(metadata["actor"])
    if metadata.get("heartbeat"):
        return "heartbeat"
    if metadata.get("unattended"):
        return "unattended"
    return "user"


def _preview(args: dict[str, Any], limit: int = 300) -> str:
    text = json.dumps(args, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Approver:
    """Applies ``decide``, asks the person when needed, and audits every answer."""

    def __init__(
        self, config: Config, *, store: Any = None, callback: ApprovalCallback | None = None
    ) -> None:
        self.config = config
        self.store = store
        self.callback = callback

    async def check(
        self,
        name: str,
        args: dict[str, Any],
        *,
        read_only: bool,
        session: str,
        metadata: dict[str, Any],
        turn_id: str,
    ) -> Decision:
        unattended = bool(metadata.get("unattended") or metadata.get("heartbeat"))
        decision = decide(self.config, name, read_only=read_only, unattended=unattended)
        if decision.outcome == "ask":
            decision = await self._ask(name, args)
        self._audit(decision, name, args, session, metadata, turn_id, unattended)
        return decision

    async def _ask(self, name: str, args: dict[str, Any]) -> Decision:
        if self.callback is None:
            return Decision(
                "deny",
                f"{name} needs approval and nobody can be asked here; add it to "
                "bot.tools.auto_approve to allow it",
            )
        try:
            ok = await self.callback(name, args)
        except (OSError, EOFError, RuntimeError, ValueError) as exc:
            logger.warning("approval prompt for {} failed: {}", name, exc)
            return Decision("deny", f"asking for approval of {name} failed ({exc})")
        if ok:
            return Decision("approve", f"{name} was approved by the user")
        return Decision("deny", f"{name} was declined by the user")

    def _audit(
        self,
        decision: Decision,
        name: str,
        args: dict[str, Any],
        session: str,
        metadata: dict[str, Any],
        turn_id: str,
        unattended: bool,
    ) -> None:
        approved = decision.approved
        logger.bind(session=session).info(
            "tool {} {}: {}", name, "approved" if approved else "denied", decision.reason
        )
        if self.store is None:
            return
        details = {
            "session": session,
            "turn_id": turn_id,
            "run_id": metadata.get("run_id"),
            "entry": metadata.get("entry"),
            "unattended": unattended,
            "matched": decision.entry,
            "arguments": _preview(args),
        }
        try:
            self.store.audit(
                actor_of(metadata),
                "tool.approve" if approved else "tool.deny",
                name,
                "approved" if approved else "denied",
                decision.reason,
                details=details,
            )
        except StoreError as exc:
            logger.bind(session=session).error("could not audit the {} decision: {}", name, exc)
