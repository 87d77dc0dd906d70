"""Which rows of the ``notices`` table belong to a cron job.

The owner is told once when a job cannot run (``service._report_invalid``, through
the heartbeat's ``Notifier``). Each job's notices sit under a scope of their own
(the table's workspace column ``(cron):<job>``), so removing the job removes them
in the same transaction (``CronJobs.remove``): a job added again under that name,
and broken the same way, is news again instead of being kept quiet by a row of a
job that is gone. Homes from before kept every job's notices under ``(cron)``;
such a row is found by its key (the job's current reason) when the job is fixed
or removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import and_, delete, or_

from vikingbot.heartbeat.notices import digest_of
from vikingbot.store.tables import notices

if TYPE_CHECKING:
    from sqlalchemy import Connection

LEGACY_SCOPE = "(cron)"


def scope(job_name: str) -> str:
    """The notices table's workspace column for one job's notices."""
    return f"(cron):{job_name}"


def invalid_key(job_name: str, reason: str) -> str:
    """What "job cannot run" notices are keyed by: the job and the reason."""
    return f"cron-invalid:{job_name}:{reason}"


def forget_job(conn: Connection, job_name: str, reason: str | None) -> int:
    """Delete every notice of ``job_name`` (and its legacy row for ``reason``) on ``conn``;
    how many rows went."""
    mine = notices.c.workspace == scope(job_name)
    if reason is not None:
        legacy = and_(
            notices.c.workspace == LEGACY_SCOPE,
            notices.c.digest == digest_of(invalid_key(job_name, reason)),
        )
        mine = or_(mine, legacy)
    return int(conn.execute(delete(notices).where(mine)).rowcount or 0)
