"""Per-chat token and cost counts, kept in the session's metadata (pure functions).

After each chat turn the gateway adds the turn's figures to ``metadata["usage"]``, a
dict of day (``YYYY-MM-DD``) to counts, keeping ``KEEP_DAYS`` days, and stores the
turn itself as ``metadata["last_request"]``. ``/usage`` and ``/status`` read them.
"""

from __future__ import annotations

from typing import Any

KEEP_DAYS = 62
FIELDS = ("requests", "model_calls", "tokens_in", "tokens_out", "cost_usd")


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def added(usage: Any, day: str, turn: dict[str, float]) -> dict[str, dict[str, float]]:
    """``usage`` (whatever was stored) with ``turn``'s counts added to ``day``; old days dropped."""
    days: dict[str, dict[str, float]] = {}
    if isinstance(usage, dict):
        for d, counts in usage.items():
            if isinstance(d, str) and len(d) == 10 and isinstance(counts, dict):
                days[d] = {f: _num(counts.get(f)) for f in FIELDS}
    today = days.setdefault(day, dict.fromkeys(FIELDS, 0.0))
    for f in FIELDS:
        today[f] += _num(turn.get(f))
    for old in sorted(days)[:-KEEP_DAYS]:
        del days[old]
    return days


def totals(usage: Any, prefix: str) -> dict[str, float]:
    """The counts of every stored day starting with ``prefix`` (a day, or ``YYYY-MM``)."""
    out = dict.fromkeys(FIELDS, 0.0)
    if not isinstance(usage, dict):
        return out
    for d, counts in usage.items():
        if isinstance(d, str) and d.startswith(prefix) and isinstance(counts, dict):
            for f in FIELDS:
                out[f] += _num(counts.get(f))
    return out


def line(counts: dict[str, float]) -> str:
    return (
        f"{int(counts['tokens_in']):,} tokens in, {int(counts['tokens_out']):,} out, "
        f"${counts['cost_usd']:.4f}, {int(counts['model_calls'])} model call(s)"
    )
