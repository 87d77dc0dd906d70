"""The small grammars every part reads, each parsed in one place (pure, total, linear).

- **Durations** (``every:`` in HEARTBEAT.md, ``cron add --every``, ``--timeout``,
  ``stale_after`` in the config, the agent's cron tool): a number with its unit,
  ``90s``, ``30m``, ``2h``, ``1d`` (``1.5h`` too; the unit in any case, spaces
  allowed before it). A bare ``30`` is refused everywhere: is it seconds or
  minutes? The one exception is a JSON number in the config file, which is
  seconds, as a number in a JSON file has no other way to be written.
- **Times of day**: ``HH:MM`` on a 24-hour clock, ``00:00``-``23:59``; the end of
  a window may also be ``24:00``.
- **Cron expressions**: five fields (minute hour day-of-month month day-of-week),
  checked by cronsim, and refused when they can never fire (``0 9 31 2 *``).

Each parser returns None (or a reason) instead of raising on bad input, and
callers word the error for where the text came from (a HEARTBEAT.md line, a
config key, a CLI option).
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from functools import lru_cache
from typing import Any

DURATION_EXAMPLES = "90s, 30m, 2h or 1d"
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"([0-9]{1,9}(?:\.[0-9]{1,6})?)[ \t]*([smhdSMHD])")
_HHMM = re.compile(r"([0-9]{1,2}):([0-9]{2})")
_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,?#LW-]{1,100}")
CRON_FIELDS = "minute hour day-of-month month day-of-week"


def duration_s(text: str) -> float | None:
    """``"90s"``/``"30m"``/``"2h"``/``"1d"`` -> seconds; None for anything else."""
    if not isinstance(text, str) or len(text) > 40:
        return None
    m = _DURATION.fullmatch(text.strip())
    if m is None:
        return None
    return float(m.group(1)) * UNIT_S[m.group(2).lower()]


def duration_text(seconds: float) -> str | None:
    """Whole seconds in the largest unit that divides them (``172800`` -> ``"2d"``,
    ``600`` -> ``"10m"``); None for a fraction of a second or a negative number."""
    if not math.isfinite(seconds) or seconds < 0 or seconds != int(seconds):
        return None
    whole = int(seconds)
    for unit in ("d", "h", "m"):
        if whole and whole % UNIT_S[unit] == 0:
            return f"{whole // UNIT_S[unit]}{unit}"
    return f"{whole}s"


def to_seconds(value: Any) -> float:
    """A duration from a config value or an option: text with its unit, or a JSON number
    (seconds). Raises ``ValueError`` saying what was expected."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if math.isfinite(value) and value >= 0:
            return float(value)
        raise ValueError(f"expected a duration of zero or more seconds, got {value!r}")
    seconds = duration_s(value) if isinstance(value, str) else None
    if seconds is not None:
        return seconds
    shown = value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "…"
    if isinstance(value, str) and re.fullmatch(r"[ \t]*[0-9]{1,9}(?:\.[0-9]+)?[ \t]*", value):
        number = value.strip()
        raise ValueError(
            f"expected a duration with its unit, like {DURATION_EXAMPLES}, got {shown!r} "
            f"(seconds or minutes? write {number}s or {number}m)"
        )
    raise ValueError(f"expected a duration like {DURATION_EXAMPLES}, got {shown!r}")


def time_of_day(text: str, *, allow_24: bool = False) -> tuple[int, int] | None:
    """``"09:30"`` -> (9, 30); ``"24:00"`` only with ``allow_24``; None when not a time."""
    if not isinstance(text, str) or len(text) > 10:
        return None
    m = _HHMM.fullmatch(text.strip())
    if m is None:
        return None
    hour, minute = int(m.group(1)), int(m.group(2))
    if hour <= 23 and minute <= 59:
        return hour, minute
    if allow_24 and (hour, minute) == (24, 0):
        return hour, minute
    return None


@lru_cache(maxsize=1024)
def cron_problem(expr: str) -> str | None:
    """Why a cron expression is not usable (a phrase to follow the expression), or None."""
    from cronsim import CronSim, CronSimError

    fields = expr.split() if isinstance(expr, str) else []
    if len(fields) != 5:
        return f"needs 5 fields ({CRON_FIELDS}), e.g. '0 9 * * 1-5'; got {len(fields)}"
    if not all(_CRON_FIELD.fullmatch(f) for f in fields):
        return "has characters a cron field never holds"
    try:
        next(CronSim(" ".join(fields), datetime(2000, 1, 1)))
    except CronSimError as exc:
        return f"is not a valid expression ({exc})"
    except StopIteration:
        return "never fires"
    return None


def normal_cron(expr: str) -> str:
    """The expression with single spaces between its fields (check it first)."""
    return " ".join(expr.split())


def closest(word: str, choices: Any, cutoff: float = 0.75) -> str | None:
    """The choice most like ``word`` (a typo's "did you mean"), or None when none is close.

    Case is ignored; ``word`` itself is never suggested. Long inputs are cut to
    64 characters first, so the comparison stays cheap whatever the user typed.
    """
    import difflib

    folded = word[:64].casefold()
    options = {str(c).casefold(): str(c) for c in choices if str(c).casefold() != folded}
    found = difflib.get_close_matches(folded, list(options), n=1, cutoff=cutoff)
    return options[found[0]] if found else None
