"""An agent loop in one module: it answers every prompt with "echo: <prompt>".

Everything a loop must honour (one turn per session at a time, the turn
timeout, what is written to history, the heartbeat no-op rule, the reply cap)
comes from ``run_locked``; the loop fills the ``TurnLog``.
"""

from __future__ import annotations

from typing import Any

from vikingbot.agent.history import TurnLog, run_locked, to_key
from vikingbot.agent.types import AgentLoop, Readiness, TurnResult
from vikingbot.session.types import SessionKey
from vikingbot.tools.base import Deliver


class EchoLoop(AgentLoop):
    name = "echo"

    def readiness(self) -> Readiness:
        return Readiness.ok("echo: answers with the prompt")

    async def run_turn(
        self,
        prompt: str,
        session_key: SessionKey | str,
        metadata: dict[str, Any] | None = None,
        *,
        deliver: Deliver | None = None,
    ) -> TurnResult:
        key = to_key(session_key)

        async def body(turn: TurnLog) -> None:
            turn.user(prompt)  # kept even if the turn fails
            turn.reply(f"echo: {prompt}")  # written when the turn completes

        return await run_locked(
            self.config, self.sessions, self.clock, key, dict(metadata or {}), body
        )
