"""May this tool call run? The approval policy, and the audit trail of every answer.

Interactive turns (someone is present):
  1. ``bot.tools.auto_deny`` matches -> deny;
  2. ``bot.tools.auto_approve`` matches -> approve;
  3. the tool declares itself read-only -> approve;
  4. otherwise ask the person through the ``ApprovalCallback`` (the loop's own, or
     the turn's: ``TURN_ASKER``, which the gateway sets for a chat turn so the
     question is asked in that chat); with neither (nobody can be asked) -> deny.

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

What is asked is an ``Action``, named by what it *is*, never by a label the
agent picks (heartbeat spec: "nothing the agent chooses widens what runs
unattended"). Make one with the constructor for its source and pass it to
``decide_action`` (pure) or ``Approver.check`` (asks, audits):

- ``tool_action(name, read_only=...)``: a built-in or plug-in tool, by its
  registered name;
- ``acp_action(kind, title)``: an ACP permission request. The decision uses the
  ``kind`` through ``ACP_KIND_TOOLS`` (``read`` is ``read_file``, ``execute`` is
  ``exec``, ...); the title only narrows: a title that ``auto_deny`` matches,
  or that is a tool name the policy would treat more strictly, makes the
  answer stricter, never looser;
- ``mcp_action(server, tool, ...)``: an MCP tool, by the server's name *as
  configured* and the tool's name. Lists name it as the model sees it
  (``mcp_<server>_<tool>``, ``vikingbot.mcp.naming``) or as ACP agents do
  (``mcp__<server>__<tool>``); ``mcp_<server>_*`` and ``mcp__<server>__*`` cover the
  tools of the server configured as ``<server>``, its name exactly as written (never
  those of a server named ``<server>_x``; ``mcp_a_b_*`` does not cover server ``a.b``,
  ``mcp__time__*`` not server ``time__shell``). With
  the server's ``identity`` (command line or URL) and the fingerprint its approvals
  were given for (``vikingbot.mcp.pins``), an approval of a server whose entry now
  points elsewhere is refused until the owner approves it again.

``runs_unattended(config, name)`` is the one predicate for "may this tool run
with nobody present" (what an unattended turn may be offered).
"""

from __future__ import annotations

import json
import re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from loguru import logger

from vikingbot.errors import StoreError
from vikingbot.mcp.naming import tool_name
from vikingbot.mcp.pins import same
from vikingbot.mcp.types import McpAction
from vikingbot.redact import mask_identity, mask_text
from vikingbot.tools.base import is_unattended

if TYPE_CHECKING:
    from vikingbot.agent.types import ApprovalCallback
    from vikingbot.config.schema import Config
    from vikingbot.mcp.types import McpAction

Outcome = Literal["approve", "deny", "ask"]

TURN_ASKER: ContextVar[ApprovalCallback | None] = ContextVar("turn_asker", default=None)
"""Who to ask in the running turn (set by whoever starts an attended turn, e.g. the
gateway for a chat message: the chat is asked). Tasks the turn starts inherit it."""

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
        prefix = entry[:-1]  # mcp__<server>__: the rest is one tool, no separator in it
        rest = name[len(prefix) :]
        return name.startswith(prefix) and bool(rest) and "__" not in rest
    return False


def first_match(
    entries: list[str], name: str, *, star: bool, mcp: McpAction | None = None
) -> str | None:
    """The first entry that covers ``name`` (for an MCP tool: any of its names, or its
    configured server's ``mcp_<server>_*``)."""
    if mcp is None:
        return next((e for e in entries if entry_matches(e, name, star=star)), None)
    # an MCP tool: exact names, or a wildcard naming its configured server exactly as
    # written (``a.b`` is not covered by ``mcp_a_b_*``, ``time__shell`` not by
    # ``mcp__time__*``): never a match across a separator
    names = (name, f"mcp__{mcp.server}__{mcp.tool}")
    stars = (f"mcp_{mcp.server}_*", f"mcp__{mcp.server}__*")
    for e in entries:
        entry = e.strip()
        if entry in names or entry in stars or (star and entry == "*"):
            return e
    return None


def _repointed(name: str, mcp: McpAction | None) -> Verdict | None:
    """A denial when ``mcp``'s server no longer is the one its approvals were given for."""
    if mcp is None or mcp.pinned is None or same(mcp.pinned, mcp.identity):
        return None
    was = mcp.pinned.split(" ", 1)[-1]
    return Verdict(
        "deny",
        f"{name}: MCP server {mcp.server!r} now runs {mask_identity(mcp.identity)[:200]!r}, but it "
        f"was approved as {was!r}; approvals do not move with a repointed entry. The owner "
        f"can approve it again with: vikingbot mcp trust {mcp.server}",
    )


def decide(
    config: Config,
    name: str,
    *,
    read_only: bool,
    unattended: bool,
    mcp: McpAction | None = None,
) -> Verdict:
    """The policy, without I/O: approve, deny, or ask the person (``mcp``: which configured
    MCP server and tool ``name`` is; see ``mcp_action``)."""
    tools = config.bot.tools
    hit = first_match(tools.auto_deny, name, star=True, mcp=mcp)
    if hit is not None:
        return Verdict("deny", f"{name} is denied by bot.tools.auto_deny ({hit!r})", hit)
    if unattended:
        hit = first_match(config.bot.heartbeat.safe_tools, name, star=False, mcp=mcp)
        if hit is not None:
            return _repointed(name, mcp) or Verdict(
                "approve", f"{name} is in bot.heartbeat.safe_tools", hit
            )
        return Verdict(
            "deny",
            f"{name} is not in bot.heartbeat.safe_tools; unattended turns (heartbeat, cron) "
            "run only the tools listed there",
        )
    hit = first_match(tools.auto_approve, name, star=True, mcp=mcp)
    if hit is not None:
        return _repointed(name, mcp) or Verdict(
            "approve", f"{name} is approved by bot.tools.auto_approve ({hit!r})", hit
        )
    if read_only:
        return Verdict("approve", f"{name} is a read-only tool")
    return Verdict("ask", f"{name} changes things and needs approval")


ACP_KIND_TOOLS: dict[str, str | None] = {
    "read": "read_file",
    "search": "grep",
    "think": "read_file",
    "fetch": "web_fetch",
    "edit": "edit_file",
    "delete": "exec",
    "move": "exec",
    "execute": "exec",
    "switch_mode": None,
    "other": None,
}
"""What an ACP permission ``kind`` counts as: the built-in tool with the same power.

The lists (``safe_tools``, ``auto_approve``, ``auto_deny``) are matched against
this name. ``delete`` and ``move`` count as ``exec`` (vikingbot's own tools can
remove or move a file only by running a command); a kind that maps to ``None``
(or one the protocol does not define) is never approved with nobody present.
"""

READ_ONLY_KINDS = frozenset({"read", "search", "think", "fetch"})


@dataclass(frozen=True)
class Action:
    """One thing an agent wants to run, named by what it is.

    ``name`` is what the lists are matched against (``None``: nothing may approve
    it unattended); ``kind`` and ``title`` are an ACP request's kind and the
    label the agent gave, kept for the audit log (the title may only narrow).
    """

    name: str | None
    read_only: bool
    kind: str | None = None
    title: str = ""
    mcp: McpAction | None = None  # an MCP tool: its configured server, as configured

    @property
    def shown(self) -> str:
        """How the audit log names the action."""
        if self.kind is not None:
            return f"acp:{shown_name(self.kind, 40)}"
        return shown_name(self.name or "")


def tool_action(name: str, *, read_only: bool) -> Action:
    """A built-in or plug-in tool, by its registered name."""
    return Action(name, read_only)


def mcp_action(
    server: str,
    tool: str,
    *,
    read_only: bool = False,
    identity: str = "",
    pinned: str | None = None,
) -> Action:
    """An MCP tool: ``server`` is the name in vikingbot's config, not one the server reports.

    Pass ``read_only=True`` only when the configuration says so: an MCP server's
    own ``readOnlyHint`` is a label the server picks. ``identity`` is the server's
    command line or URL as configured, ``pinned`` the fingerprint its approvals were
    given for (``None``: none recorded yet).
    """
    return Action(tool_name(server, tool), read_only, mcp=McpAction(server, tool, identity, pinned))


def acp_action(kind: str | None, title: str | None) -> Action:
    """An ACP permission request: decided by ``kind``, the ``title`` kept for narrowing."""
    kind = str(kind or "other")[:40]
    return Action(ACP_KIND_TOOLS.get(kind), kind in READ_ONLY_KINDS, kind, str(title or "")[:200])


_STRICTNESS: dict[Outcome, int] = {"approve": 0, "ask": 1, "deny": 2}


def decide_action(
    config: Config, action: Action, *, unattended: bool, known: frozenset[str] = frozenset()
) -> Verdict:
    """The policy for any action, without I/O (the one rule; see the module docstring).

    ``known`` are the tool names the caller knows of: a title equal to one of
    them (or one ``auto_deny`` matches) is decided too, and the stricter answer
    wins.
    """
    if action.name is None:
        verdict = (
            Verdict("deny", f"ACP kind {action.kind!r} runs only when someone approves it")
            if unattended
            else Verdict("ask", f"ACP kind {action.kind!r} needs approval")
        )
    else:
        verdict = decide(
            config, action.name, read_only=action.read_only, unattended=unattended, mcp=action.mcp
        )
    if action.kind is None:
        return verdict
    label = f"ACP kind {action.kind!r} (counts as {action.name or 'nothing'})"
    verdict = Verdict(verdict.outcome, f"{label}: {verdict.reason}", verdict.entry)
    title = action.title
    named = title in known or title in ACP_KIND_TOOLS.values()
    denied = first_match(config.bot.tools.auto_deny, title, star=False) if title else None
    if denied is None and not named:
        return verdict
    narrow = decide(config, title, read_only=False, unattended=unattended)
    if _STRICTNESS[narrow.outcome] > _STRICTNESS[verdict.outcome]:
        return Verdict(
            narrow.outcome, f"{label}, titled {shown_name(title)!r}: {narrow.reason}", narrow.entry
        )
    return verdict


def runs_unattended(config: Config, what: str | Action) -> bool:
    """May the tool (a name, or an ``Action``) run with nobody present? (Offer only these
    to unattended turns.)"""
    if isinstance(what, str):
        return decide(config, what, read_only=False, unattended=True).approved
    return decide_action(config, what, unattended=True).approved


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
        action: Action,
        args: dict[str, Any],
        *,
        session: str,
        metadata: dict[str, Any],
        turn_id: str,
        known: frozenset[str] = frozenset(),
    ) -> Verdict:
        """Decide ``action`` (asking the person if the policy says so) and audit the answer."""
        unattended = is_unattended(metadata)
        decision = decide_action(self.config, action, unattended=unattended, known=known)
        if decision.outcome == "ask":
            decision = await self._ask(action, args)
        return self._audit(decision, action, args, session, metadata, turn_id, unattended)

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
        action = Action(name, False)
        return self._audit(
            verdict, action, args, session, metadata, turn_id, is_unattended(metadata)
        )

    async def _ask(self, action: Action, args: dict[str, Any]) -> Verdict:
        name = action.shown if action.kind is None else f"{action.shown} {action.title!r}"
        callback = self.callback or TURN_ASKER.get()
        if callback is None:
            fix = (
                f"; add {action.name} to bot.tools.auto_approve to allow it" if action.name else ""
            )
            return Verdict("deny", f"{name} needs approval and nobody can be asked here{fix}")
        try:
            ok = await callback(name, args)
        except (OSError, EOFError, RuntimeError, ValueError) as exc:
            logger.warning("approval prompt for {} failed: {}", name, exc)
            return Verdict("deny", f"asking for approval of {name} failed ({exc})")
        if ok:
            return Verdict("approve", f"{name} was approved by the user")
        return Verdict("deny", f"{name} was declined by the user")

    def _audit(
        self,
        decision: Verdict,
        action: Action,
        args: dict[str, Any],
        session: str,
        metadata: dict[str, Any],
        turn_id: str,
        unattended: bool,
    ) -> Verdict:
        """Write the verdict to the audit table; an unattended approval that cannot be written
        becomes a denial (nobody is there to see the log line instead)."""
        approved = decision.approved
        shown = action.shown
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
            "kind": action.kind,
            "title": shown_name(action.title, 200) if action.kind is not None else None,
            "arguments": _preview(args),
        }
        if action.mcp is not None:  # which server, as configured, and which of its tools
            details["mcp_server"] = action.mcp.server
            details["mcp_tool"] = shown_name(action.mcp.tool)
            details["mcp_identity"] = mask_text(action.mcp.identity)[:300]
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
