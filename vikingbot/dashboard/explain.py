"""A short sentence per heartbeat reason code, for the runs table (docs/heartbeat.md
holds the same table for readers of the docs)."""

from __future__ import annotations

REASONS = {
    "disabled": "the heartbeat is switched off",
    "quiet-hours": "outside the active hours",
    "skip-flag": "the session is marked to be skipped",
    "stale": "nobody wrote in the chat recently",
    "no-sessions": "no chat uses this workspace",
    "paused": "the workspace is paused",
    "budget": "today's budget is used up",
    "empty": "nothing to do in HEARTBEAT.md",
    "unreadable": "HEARTBEAT.md could not be read",
    "busy": "the previous run is still going",
    "parked": "failed or continued too often; edit it to run again",
    "pending": "a run of this entry is in progress",
    "not-due": "its next time has not come",
    "no-work": "the checker found nothing to do",
    "unchanged": "the checker found the same work as last time",
    "due": "its time had come",
    "manual": "run now",
    "continuation": "the last run asked to continue",
}


def explain(reason: str | None, error: str | None) -> str:
    text = REASONS.get(reason or "", "")
    if error:
        return f"{text}: {error}" if text else error
    return text
