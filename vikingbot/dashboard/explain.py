"""A reason code in words for the dashboard's run listings: the heartbeat's one table
(``heartbeat/reasons.py``, also behind `heartbeat plan` and docs/heartbeat.md)."""

from __future__ import annotations

from vikingbot.heartbeat.reasons import MEANING as REASONS
from vikingbot.heartbeat.reasons import explain

__all__ = ["REASONS", "explain"]
