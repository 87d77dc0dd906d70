"""The agent seam: what every agent loop takes and returns.

The heartbeat, cron and channels all call ``AgentLoop.run_turn``. A different
agent can be put behind the bot by registering a loop under the
``vikingbot.loops`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from vikingbot.session.types import SessionKey
from vikingbot.tools.base import Deliver

TurnEnd = Literal["final", "turn-limit", "timeout", "error"]


@dataclass
class ToolCallRecord:
    """One tool call the model asked for, and what came of it."""

    name: str
    arguments: dict[str, Any]
    result: str
    read_only: bool
    approved: bool
    error: bool = False


@dataclass
class TurnResult:
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

    @property
    def tools_run(self) -> list[str]:
        return [c.name for c in self.tool_calls if c.approved and not c.error]


# Metadata keys a caller may set on a turn (all optional):
#   heartbeat: bool      - a heartbeat turn (no-op replies are not written to history)
#   unattended: bool     - nobody is present: safe-tools policy applies (heartbeat, cron)
#   workspace: str       - workspace directory for the turn's tools and context
#   reply_to: str        - delivery target for the message tool (channel:chat[:thread])
#   run_id: str          - ledger/outbox id; used to make delivery idempotent
#   entry: str           - HEARTBEAT.md entry title, for logs and audit
#   actor: str           - who the audit log names (default heartbeat / unattended / user)
#   timeout_s: float     - bound the whole turn; past it the turn ends as "timeout"
ApprovalCallback = Callable[[str, dict[str, Any]], Awaitable[bool]]


@runtime_checkable
class AgentLoop(Protocol):
    async def run_turn(
        self,
        prompt: str,
        session_key: SessionKey,
        metadata: dict[str, Any] | None = None,
        *,
        deliver: Deliver | None = None,
    ) -> TurnResult: ...
