"""The agent seam: the ``AgentLoop`` base class every loop subclasses, and what a turn returns.

The heartbeat, cron, channels, the dashboard and ``vikingbot chat`` all drive a
loop through this class and nothing else: ``start()`` (optional warm-up),
``readiness()`` (can it answer, and if not, what to set), ``run_turn(...)`` and
``aclose()``. A loop is registered under the ``vikingbot.loops`` entry-point
group and constructed as ``Loop(config, sessions=..., store=..., bus=...,
workspaces=..., clock=..., environ=..., approval_callback=..., on_tool_call=...,
user_skills=...)``;
the base ``__init__`` keeps all of these. The turn lock, history writes and the
heartbeat no-op rule live in ``agent.history`` for every loop to use
(docs/extending.md shows a whole loop in one module).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from vikingbot.clock import SystemClock
from vikingbot.errors import AgentError
from vikingbot.session.types import SessionKey
from vikingbot.tools.base import Deliver, TellOwner

if TYPE_CHECKING:
    from vikingbot.bus.bus import MessageBus
    from vikingbot.clock import Clock
    from vikingbot.config.schema import Config
    from vikingbot.mcp.hub import McpHub
    from vikingbot.providers.fallback import OutageEvent
    from vikingbot.session.store import SessionStore
    from vikingbot.workspace.manager import WorkspaceManager

TurnEnd = Literal["final", "turn-limit", "timeout", "error"]


@dataclass
class ToolCallRecord:
    """One tool call the agent made (or asked leave for), and what came of it."""

    name: str
    arguments: dict[str, Any]
    result: str
    read_only: bool
    approved: bool
    error: bool = False


@dataclass
class TurnResult:
    """What a turn did. Heartbeat signatures and the ledger rely on ``wrote``,
    ``tools_run`` and ``messages_sent``: every loop must keep them true."""

    text: str | None
    ended: TurnEnd = "final"
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    wrote: bool = False  # a non-read-only tool ran, or a message was sent
    messages_sent: int = 0
    model_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    provider_down: bool = False  # ended by a ProviderUnavailable (an outage, not a failure)
    # the last request's size in characters by part (system, memory, summary, recent, tools)
    request_chars: dict[str, int] = field(default_factory=dict)
    model: str | None = None  # "provider/model" of the last answer (a fallback's in an outage)

    @property
    def tools_run(self) -> list[str]:
        return [c.name for c in self.tool_calls if c.approved and not c.error]


@dataclass(frozen=True)
class Readiness:
    """Whether a loop can answer now; if not, ``problem`` says what to set, in words a
    user can act on (naming every missing piece: key variable, base URL, command)."""

    ready: bool
    problem: str | None = None
    detail: str = ""  # what answers, e.g. "openai / gpt-4o-mini" or "acp: claude-agent-acp"

    @classmethod
    def ok(cls, detail: str = "") -> Readiness:
        return cls(True, None, detail)

    @classmethod
    def missing(cls, problem: str, detail: str = "") -> Readiness:
        return cls(False, problem, detail)


# Metadata keys a caller may set on a turn (all optional):
#   heartbeat: bool      - a heartbeat turn (no-op replies are not written to history)
#   unattended: bool     - nobody is present: safe-tools policy applies (heartbeat, cron)
#   workspace: str       - workspace directory for the turn's tools and context
#   reply_to: str        - delivery target for the message tool (channel:chat[:thread])
#   run_id: str          - ledger/outbox id; used to make delivery idempotent
#   entry: str           - HEARTBEAT.md entry title, for logs and audit
#   actor: str           - who the audit log names (default heartbeat / unattended / user)
#   timeout_s: float     - bound the whole turn (default bot.agents.turn_timeout_s)
#   provider: str        - a bot.providers section (or kind) for this turn (heartbeat.provider)
#   model: str           - the model for this turn (heartbeat.model, an entry's model:)
#   images: list[ImagePart] - pictures the person sent (vikingbot.media); not on unattended turns
#   via: str             - how the prompt came: "audio" (a transcribed voice note), kept in history
ApprovalCallback = Callable[[str, dict[str, Any]], Awaitable[bool]]
ToolObserver = Callable[[ToolCallRecord], None]


class TurnRunner(Protocol):
    """What a service that only runs turns (cron, heartbeat) needs of a loop."""

    async def run_turn(
        self,
        prompt: str,
        session_key: SessionKey,
        metadata: dict[str, Any] | None = None,
        *,
        deliver: Deliver | None = None,
    ) -> TurnResult: ...


class AgentLoop(ABC):
    """Base class of every agent loop: the whole contract in one place.

    Subclasses implement ``readiness`` and ``run_turn``; ``start``, ``aclose``
    and ``reconfigure`` have working defaults. ``run_turn`` returns a
    ``TurnResult`` for any failure of the agent itself (``ended="error"``) and
    raises only ``NotConfiguredError`` (nothing to answer with) or
    ``CancelledError``.
    """

    name: ClassVar[str] = ""

    def __init__(
        self,
        config: Config,
        *,
        sessions: SessionStore,
        store: Any = None,
        bus: MessageBus | None = None,
        workspaces: WorkspaceManager | None = None,
        clock: Clock | None = None,
        environ: Mapping[str, str] | None = None,
        approval_callback: ApprovalCallback | None = None,
        on_tool_call: ToolObserver | None = None,
        user_skills: Path | None = None,
        mcp: McpHub | None = None,
        tell_owner: TellOwner | None = None,
    ) -> None:
        self.config = config
        self.sessions = sessions
        self.store = store
        self.bus = bus
        self.workspaces = workspaces
        self.clock: Clock = clock or SystemClock()
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.approval_callback = approval_callback
        self.on_tool_call = on_tool_call
        self.user_skills = user_skills  # <home>/skills, beside each workspace's own skills
        self.mcp = mcp  # the MCP servers, owned by the gateway or the CLI run (not the loop)
        self.tell_owner = tell_owner  # tell the owner once (a tool's lasting failure)
        # told when a model has an outage and a fallback answers, and when it is back
        # (providers/fallback.py); the gateway sets it to tell the owner once
        self.on_outage: Callable[[OutageEvent], None] | None = None

    async def start(self) -> None:
        """Warm up (import an SDK, start an agent process). Optional; turns start it lazily."""
        return None

    async def aclose(self) -> None:
        """Release what ``start`` or the turns opened (connections, processes)."""
        return None

    def models_down(self) -> list[dict[str, str]]:
        """The models this loop found down (``model``, ``since``, ``error``); a loop without
        fallbacks has none to report."""
        return []

    def reconfigure(self, config: Config) -> None:
        """Use a reloaded config from the next turn on."""
        self.config = config

    def environ_changed(self) -> None:
        """The variables in ``environ`` changed (the gateway re-read a ``.env`` file):
        what the loop made from them is made again for the next turn. The default
        does nothing (a loop that reads ``environ`` at each use)."""
        return None

    def subagents(self) -> list[dict[str, Any]]:
        """The sub-agents running now (``spawn``; docs/agent.md), for status and the
        dashboard. A loop without sub-agents has none."""
        return []

    def cancel_subagents(self, session: SessionKey | str, only: str | None = None) -> int:
        """Stop the running sub-agents of ``session`` (the hook for a stop command), or
        only the one whose id is ``only``; how many were running."""
        return 0

    @abstractmethod
    def readiness(self) -> Readiness:
        """Ready to answer, or what is missing. Cheap: imports no SDK, starts nothing."""

    async def compact(self, session_key: SessionKey | str) -> str:
        """Fold the session's older turns into a summary now (``/compact``); a loop that
        keeps its own context (an ACP agent) says so."""
        raise AgentError(f"the {self.name} agent loop keeps its own context; it cannot compact")

    @abstractmethod
    async def run_turn(
        self,
        prompt: str,
        session_key: SessionKey,
        metadata: dict[str, Any] | None = None,
        *,
        deliver: Deliver | None = None,
    ) -> TurnResult:
        """One turn: ``prompt`` in the session's context -> the reply and what was done."""
