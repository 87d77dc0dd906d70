"""May this tool call run? The approval policy, and the audit trail of every answer.

Interactive turns (someone is present):
  1. ``bot.tools.auto_deny`` matches -> deny;
  2. ``bot.tools.auto_approve`` matches -> approve;
  3. the tool declares itself read-only -> approve;
  4. otherwise ask the person through the ``ApprovalCallback``; with no
     callback (nobody can be asked, e.g. a chat platform) -> deny.

Unattended turns (``is_unattended(metadata)``: heartbeat, cron, dashboard
prompts), heartbeat spec section 6:
  1. ``bot.tools.auto_deny`` matches -> deny;
  2. the name matches an entry of ``bot.heartbeat.safe_tools`` -> approve;
  3. otherwise deny. ``auto_approve`` is ignored and so is the tool's own
     read-only flag; nothing is guessed from a name's verb or prefix.

Matching is by exact name. ``*`` matches every tool in ``auto_approve`` and
``auto_deny`` only, never in ``safe_tools``. An entry written out as
``mcp__<server>__*`` matches every tool of that one MCP server
(``mcp__<server>__<tool>``) in all three lists; no other wildcard exists.

Every decision is written to the audit table (``tool.approve`` / ``tool.deny``),
and so is every refusal made before the policy is asked (``Approver.refuse``:
an unknown tool name such as ``Exec`` or a look-alike ``exec``, arguments
that are not JSON or do not fit the tool). With nobody present, a decision
that cannot be audited (the store fails) is a denial.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from loguru import logger

from vikingbot.errors import StoreError
from vikingbot.tools.base import is_unattended

if TYPE_CHECKING:
    from vikingbot.agent.types import ApprovalCallback
    from vikingbot.config.schema import Config

Outcome = Literal["approve", "deny", "ask"]

_MCP_SERVER_WILDCARD = re.compile(r"^mcp__(?:(?!__)[A-Za-z0-9_.-])+__\*$")


@dataclass(frozen=True)
class Verdict:
    """The answer for one tool call: approve or deny (``ask`` before the person answered)."""

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


def decide(config: Config, name: str, *, read_only: bool, unattended: bool) -> Verdict:
    """The policy, without I/O: approve, deny, or ask the person."""
    tools = config.bot.tools
    hit = first_match(tools.auto_deny, name, star=True)
    if hit is not None:
        return Verdict("deny", f"{name} is denied by bot.tools.auto_deny ({hit!r})", hit)
    if unattended:
        hit = first_match(config.bot.heartbeat.safe_tools, name, star=False)
        if hit is not None:
            return Verdict("approve", f"{name} is in bot.heartbeat.safe_tools", hit)
        return Verdict(
            "deny",
            f"{name} is not in bot.heartbeat.safe_tools; unattended turns (heartbeat, cron) "
            "run only the tools listed there",
        )
    hit = first_match(tools.auto_approve, name, star=True)
    if hit is not None:
        return Verdict("approve", f"{name} is approved by bot.tools.auto_approve ({hit!r})", hit)
    if read_only:
        return Verdict("approve", f"{name} is a read-only tool")
    return Verdict("ask", f"{name} changes things and needs approval")


def actor_of(metadata: dict[str, Any]) -> str:
    """Who a turn acts for, as the audit log names it."""
    if metadata.get("actor"):
        return str(metadata["actor"])
    if metadata.get("heartbeat"):
        return "heartbeat"
    if is_unattended(metadata):
        return "unattended"
    return "user"


def _preview(args: dict[str, Any], limit: int = 300) -> str:
    text = json.dumps(args, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown_name(name: str, limit: int = 100) -> str:
    """A tool name as the audit log shows it: look-alikes (Cyrillic, zero-width) escaped, capped."""
    shown = name if name.isascii() and name.isprintable() else ascii(name)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


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
    ) -> Verdict:
        unattended = is_unattended(metadata)
        decision = decide(self.config, name, read_only=read_only, unattended=unattended)
        if decision.outcome == "ask":
            decision = await self._ask(name, args)
        return self._audit(decision, name, args, session, metadata, turn_id, unattended)

    def refuse(
        self,
        name: str,
        args: dict[str, Any],
        reason: str,
        *,
        session: str,
        metadata: dict[str, Any],
        turn_id: str,
    ) -> Verdict:
        """Audit a call refused before the policy was asked (unknown tool, bad arguments)."""
        verdict = Verdict("deny", reason)
        return self._audit(verdict, name, args, session, metadata, turn_id, is_unattended(metadata))

    async def _ask(self, name: str, args: dict[str, Any]) -> Verdict:
        if self.callback is None:
            return Verdict(
                "deny",
                f"{name} needs approval and nobody can be asked here; add it to "
                "bot.tools.auto_approve to allow it",
            )
        try:
            ok = await self.callback(name, args)
        except (OSError, EOFError, RuntimeError, ValueError) as exc:
            logger.warning("approval prompt for {} failed: {}", name, exc)
            return Verdict("deny", f"asking for approval of {name} failed ({exc})")
        if ok:
            return Verdict("approve", f"{name} was approved by the user")
        return Verdict("deny", f"{name} was declined by the user")

    def _audit(
        self,
        decision: Verdict,
        name: str,
        args: dict[str, Any],
        session: str,
        metadata: dict[str, Any],
        turn_id: str,
        unattended: bool,
    ) -> Verdict:
        """Write the verdict to the audit table; an unattended approval that cannot be written
        becomes a denial (nobody is there to see the log line instead)."""
        approved = decision.approved
        shown = shown_name(name)
        log = logger.bind(session=session)
        log.info("tool {} {}: {}", shown, "approved" if approved else "denied", decision.reason)
        if self.store is None:
            return decision
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
                shown,
                "approved" if approved else "denied",
                decision.reason,
                details=details,
            )
        except (StoreError, OSError) as exc:
            log.error("could not audit the {} decision: {}", shown, exc)
            if approved and unattended:
                return Verdict(
                    "deny",
                    f"{shown} was allowed but the decision could not be audited ({exc}); "
                    "with nobody present an unaudited call does not run",
                )
        return decision
