"""Cron data types: one job as stored, and what one run of it came to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

JobKind = Literal["at", "every", "cron"]
KINDS: tuple[JobKind, ...] = ("at", "every", "cron")

# last_outcome values: a finished run, a run in progress, or a job that cannot run.
RunOutcome = Literal[
    "running", "ok", "noop", "delivered", "inboxed", "error", "timeout", "interrupted", "invalid"
]


@dataclass(frozen=True)
class CronJob:
    """One row of ``cron_jobs``.

    ``expr`` is the ISO time (``at``), the interval (``every``, e.g. ``30m``) or
    the 5-field expression (``cron``). ``timezone`` is the IANA zone a naive
    ``at`` time and a ``cron`` expression are read in. ``target`` and
    ``timeout_s`` fall back to ``bot.heartbeat.target`` / ``task_timeout_s``
    when ``None``; ``workspace`` (a workspace folder name) to the cron
    session's own workspace.
    """

    name: str
    kind: str
    expr: str
    prompt: str
    created_at: datetime
    timezone: str = "UTC"
    target: str | None = None
    workspace: str | None = None
    enabled: bool = True
    timeout_s: float | None = None
    id: int | None = None
    last_run_at: datetime | None = None
    next_run_at: datetime | None = None
    last_outcome: str | None = None
    last_error: str | None = None

    @property
    def invalid(self) -> bool:
        return self.last_outcome == "invalid"

    def to_dict(self) -> dict[str, Any]:
        """The job as plain data (the ``--json`` contract)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "expr": self.expr,
            "timezone": self.timezone,
            "prompt": self.prompt,
            "target": self.target,
            "workspace": self.workspace,
            "enabled": self.enabled,
            "timeout_s": self.timeout_s,
            "created_at": self.created_at,
            "last_run_at": self.last_run_at,
            "next_run_at": self.next_run_at,
            "last_outcome": self.last_outcome,
            "last_error": self.last_error,
            "status": status_of(self),
        }


def status_of(job: CronJob) -> str:
    """One word for a person: ``invalid``, ``running``, ``done``, ``disabled`` or ``scheduled``."""
    if job.last_outcome == "invalid":
        return "invalid"
    if job.last_outcome == "running":
        return "running"
    if not job.enabled:
        return "done" if job.kind == "at" and job.last_run_at is not None else "disabled"
    return "scheduled"


@dataclass(frozen=True)
class CronRun:
    """What one run of a job came to."""

    job: str
    run_id: str
    started_at: datetime
    outcome: str  # ok | noop | delivered | inboxed | error | timeout | interrupted
    reply: str | None = None
    error: str | None = None
    duration_s: float = 0.0
    manual: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "run_id": self.run_id,
            "started_at": self.started_at,
            "outcome": self.outcome,
            "reply": self.reply,
            "error": self.error,
            "duration_s": round(self.duration_s, 3),
            "manual": self.manual,
        }
