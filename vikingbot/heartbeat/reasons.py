"""What each reason code means, and the fix for a skip: one table for `heartbeat plan`,
the dashboard's run listings and docs/heartbeat.md ("Reason codes").

Pure: ``MEANING`` is a short sentence per code (``Reason`` in types.py; a test
keeps the two equal); ``with_fix`` turns a planner decision's detail into what
`plan` shows, naming the window, the session or the command that changes it;
``row_fix`` gives `run-now`'s skip rows the same words.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from vikingbot.heartbeat.planner import TERMINAL
from vikingbot.heartbeat.types import Decision, LedgerRow, Reason

MEANING: dict[str, str] = {
    "disabled": "the heartbeat is switched off",
    "quiet-hours": "outside the active hours",
    "skip-flag": "the session is marked to be skipped",
    "stale": "nobody wrote in the chat recently",
    "no-sessions": "no chat uses this workspace",
    "paused": "the workspace is paused",
    "budget": "today's budget is used up",
    "empty": "nothing to do in HEARTBEAT.md",
    "unreadable": "HEARTBEAT.md could not be read",
    "invalid": "the entry's schedule cannot be computed",
    "checker-missing": "its only-if: checker is not configured",
    "busy": "the previous run is still going",
    "parked": "failed or continued too often; edit it to run again",
    "pending": "a run of this entry is in progress",
    "not-due": "its next time has not come",
    "provider-down": "the model provider is down",
    "no-work": "the checker found nothing to do",
    "unchanged": "the checker found the same work as last time",
    "missed": "its time passed more than bot.heartbeat.missed_grace ago (asleep or down)",
    "due": "its time had come",
    "manual": "run now",
    "continuation": "the last run asked to continue",
}


@dataclass(frozen=True)
class FixContext:
    """What the fix texts name beyond the decision itself."""

    workspace_root: Path
    stale_after_s: float
    outbound_only: frozenset[str] = frozenset()  # channels nobody writes in (push)


def explain(reason: str | None, error: str | None) -> str:
    """A ledger row's reason in words, with its error or detail (the dashboard's runs)."""
    text = MEANING.get(reason or "", "")
    if error:
        return f"{text}: {error}" if text else error
    return text


def with_fix(d: Decision, ctx: FixContext) -> str | None:
    """The detail `heartbeat plan` shows: what the planner said, and for a skip how to
    change it. Runs and skips that need nothing (not-due) keep the planner's detail."""
    if d.decision != "skip":
        return d.detail
    fix = _FIXES.get(d.reason)
    return fix(d, ctx) if fix is not None else d.detail


def row_fix(row: LedgerRow, ctx: FixContext) -> str | None:
    """The same text for a skip as ``run-now`` recorded it (the row keeps the planner's
    detail in ``error``); None for a run, whose ``error`` is its own."""
    if row.decision != "skip":
        return None
    reason = cast(Reason, row.reason)  # a skip row's reason is its decision's
    d = Decision(
        row.workspace, "skip", reason, session=row.session, entry=row.entry, detail=row.error
    )
    return with_fix(d, ctx)


def _file(d: Decision, ctx: FixContext) -> str:
    # a string join, not two Path objects: `plan` builds this for 10,000 workspaces
    return f"{ctx.workspace_root}{os.sep}{d.workspace}{os.sep}HEARTBEAT.md"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _disabled(d: Decision, ctx: FixContext) -> str:
    return "the heartbeat is off: `vikingbot heartbeat enable`"


def _quiet(d: Decision, ctx: FixContext) -> str:
    window = d.detail or "outside bot.heartbeat.active_hours"
    return f"{window}: `vikingbot heartbeat run-now --force` runs a cycle now"


def _skip_flag(d: Decision, ctx: FixContext) -> str:
    key = d.session or "this session"
    if key.startswith(f"{TERMINAL}:"):  # turning it on would not send to the terminal
        return (
            f"{key} is a `vikingbot chat` session: the terminal cannot be sent to, so "
            "results for it go to the inbox (`vikingbot inbox`, or an attached "
            "`vikingbot chat`); this workspace's tasks still run while you chat"
        )
    return f"heartbeat is off for {key}: `vikingbot sessions heartbeat on {key}`"


def _stale(d: Decision, ctx: FixContext) -> str:
    quiet = _duration(ctx.stale_after_s)
    if d.session is None:  # the checklist of a chat's own workspace
        return (
            f"the checklist of workspace {d.workspace} waits for its chat: no message there "
            f"for over {quiet} (bot.heartbeat.stale_after); its scheduled entries still run"
        )
    if d.session.split(":", 1)[0] in ctx.outbound_only:
        return (
            f"{d.session} is a push target (outbound only): nobody writes there, so it wakes "
            "no checklist; results reach it when it is the owner or an entry's deliver: target"
        )
    return (
        f"no message in {d.session} for over {quiet} (bot.heartbeat.stale_after): "
        "results do not go there until someone writes in it"
    )


def _no_sessions(d: Decision, ctx: FixContext) -> str:
    return (
        f"no chat uses workspace {d.workspace}, so its HEARTBEAT.md is not read: talk to "
        "the bot from a chat that uses it, or put the tasks in the shared workspace"
    )


def _paused(d: Decision, ctx: FixContext) -> str:
    return f"paused: `vikingbot heartbeat resume {d.workspace}`"


def _budget(d: Decision, ctx: FixContext) -> str:
    used = d.detail or "today's budget is used up"
    return (
        f"{used} (bot.heartbeat.budget): it runs again tomorrow, or now after "
        f"`vikingbot heartbeat resume {d.workspace}`"
    )


def _empty(d: Decision, ctx: FixContext) -> str:
    what = d.detail or "nothing to do"
    return f"{what}: put tasks under `## Active Tasks` in {_file(d, ctx)}"


def _unreadable(d: Decision, ctx: FixContext) -> str:
    return f"{_file(d, ctx)} {d.detail or 'could not be read'}: fix or replace the file"


def _invalid(d: Decision, ctx: FixContext) -> str:
    return f"{d.detail or 'invalid schedule'}: fix the entry in {_file(d, ctx)}"


def _checker_missing(d: Decision, ctx: FixContext) -> str:
    return d.detail or "its only-if: checker is not configured (bot.heartbeat.checkers)"


def _busy(d: Decision, ctx: FixContext) -> str:
    return f"{d.detail or 'another run holds it'}: it is looked at again when that run ends"


def _parked(d: Decision, ctx: FixContext) -> str:
    entry = shlex.quote(d.entry or "")
    why = f"parked ({d.detail})" if d.detail and d.detail != "parked" else "parked"
    return f"{why}: edit the entry, or `vikingbot heartbeat unpark {entry} -w {d.workspace}`"


def _pending(d: Decision, ctx: FixContext) -> str:
    return "a run of this entry is still going: it is looked at again when that run ends"


def _provider_down(d: Decision, ctx: FixContext) -> str:
    down = d.detail or "the model provider is down"
    return f"{down}: it runs when the provider answers (`vikingbot doctor --live` checks it)"


_FIXES = {
    "disabled": _disabled,
    "quiet-hours": _quiet,
    "skip-flag": _skip_flag,
    "stale": _stale,
    "no-sessions": _no_sessions,
    "paused": _paused,
    "budget": _budget,
    "empty": _empty,
    "unreadable": _unreadable,
    "invalid": _invalid,
    "checker-missing": _checker_missing,
    "busy": _busy,
    "parked": _parked,
    "pending": _pending,
    "provider-down": _provider_down,
}
