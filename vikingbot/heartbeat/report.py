"""What one heartbeat cycle did (``run-now --json``), and the budget notice text."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vikingbot.heartbeat.types import Decision, LedgerRow

_RESULT_FIELDS = (
    "workspace",
    "session",
    "entry",
    "decision",
    "reason",
    "outcome",
    "model_calls",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "duration_s",
    "error",
)


def budget_text(workspace: str) -> str:
    return (
        f"The heartbeat of workspace {workspace} is paused: its daily budget is used up. "
        f"`vikingbot heartbeat resume {workspace}` lifts the pause."
    )


@dataclass
class CycleReport:
    cycle_id: str
    trigger: str
    started_at: datetime
    decisions: list[Decision] = field(default_factory=list)  # planned this cycle
    rows: list[LedgerRow] = field(default_factory=list)  # one per run and per recorded skip

    def results(self) -> list[dict[str, Any]]:
        """The `run-now --json` contract: one object per decision."""
        return [{k: getattr(r, k) for k in _RESULT_FIELDS} for r in self.rows]
