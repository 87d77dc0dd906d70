"""The cron job repository: the ``cron_jobs`` table, read and written with SQLAlchemy Core.

Methods are synchronous (the CLI calls them directly; the service calls them
through ``asyncio.to_thread``). ``add`` refuses an invalid job with a
:class:`CronError` naming what is wrong; a job that became invalid in the
database is still listed, with ``last_outcome = "invalid"`` once a tick has
looked at it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from vikingbot.clock import Clock, SystemClock
from vikingbot.cron import schedule
from vikingbot.cron.types import CronJob
from vikingbot.errors import CronError, DeliveryError

if TYPE_CHECKING:
    from vikingbot.store.db import StateStore

_UNSET: Any = object()


def _utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every time we store is UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _from_row(row: Any) -> CronJob:
    m = row._mapping
    return CronJob(
        id=m["id"],
        name=m["name"],
        kind=m["kind"],
        expr=m["expr"],
        timezone=m["timezone"] or "UTC",
        prompt=m["prompt"],
        target=m["target"],
        workspace=m["workspace"],
        enabled=bool(m["enabled"]),
        timeout_s=m["timeout_s"],
        created_at=_utc(m["created_at"]) or datetime.fromtimestamp(0, UTC),
        last_run_at=_utc(m["last_run_at"]),
        next_run_at=_utc(m["next_run_at"]),
        last_outcome=m["last_outcome"],
        last_error=m["last_error"],
    )


class CronJobs:
    """Cron jobs in the state store."""

    def __init__(self, store: StateStore, clock: Clock | None = None) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()

    def list(self) -> list[CronJob]:
        """Every job, by name, valid or not."""
        import sqlalchemy as sa

        from vikingbot.store.tables import cron_jobs

        with self.store.engine.connect() as conn:
            rows = conn.execute(sa.select(cron_jobs).order_by(cron_jobs.c.name)).fetchall()
        return [_from_row(r) for r in rows]

    def get(self, name: str) -> CronJob | None:
        import sqlalchemy as sa

        from vikingbot.store.tables import cron_jobs

        with self.store.engine.connect() as conn:
            row = conn.execute(sa.select(cron_jobs).where(cron_jobs.c.name == name)).first()
        return None if row is None else _from_row(row)

    def require(self, name: str) -> CronJob:
        """The job called ``name``; :class:`CronError` listing known names otherwise."""
        job = self.get(name)
        if job is None:
            known = ", ".join(j.name for j in self.list()) or "none"
            raise CronError(f"no cron job named {name!r} (known: {known})")
        return job

    def add(
        self,
        name: str,
        kind: str,
        expr: str,
        prompt: str,
        *,
        timezone: str = "UTC",
        target: str | None = None,
        workspace: str | None = None,
        timeout_s: float | None = None,
        enabled: bool = True,
    ) -> CronJob:
        """Validate and store a new job, with its first ``next_run_at``."""
        import sqlalchemy as sa

        from vikingbot.store.tables import cron_jobs

        schedule.check_name(name)
        expr = schedule.validate(kind, expr, timezone)
        if not prompt or not prompt.strip():
            raise CronError(f"cron job {name!r} needs a prompt (what the agent should do)")
        if timeout_s is not None and timeout_s <= 0:
            raise CronError(f"cron job {name!r}: timeout must be positive, got {timeout_s!r}")
        if target is not None and not target.strip():
            target = None
        if target is not None:
            from vikingbot.delivery.targets import parse_target

            try:
                parse_target(target)
            except DeliveryError as exc:
                raise CronError(
                    f"cron job {name!r}: bad target {target!r}: {exc} "
                    "(e.g. owner, last, telegram:12345, slack:C0123, dashboard)"
                ) from exc
        now = self.clock.now()
        job = CronJob(
            name=name,
            kind=kind,
            expr=expr,
            prompt=prompt.strip(),
            created_at=now,
            timezone=timezone,
            target=target,
            workspace=workspace or None,
            enabled=enabled,
            timeout_s=timeout_s,
        )
        first = schedule.next_run(job, now)
        if first is None:
            raise CronError(
                f"cron job {name!r} would never run: {schedule.describe(job)} is in the past"
            )
        job = replace(job, next_run_at=first if enabled else None)
        values = job.to_dict()
        values.pop("status")
        try:
            with self.store.engine.begin() as conn:
                exists = conn.execute(
                    sa.select(cron_jobs.c.id).where(cron_jobs.c.name == name)
                ).first()
                if exists is not None:
                    raise CronError(
                        f"a cron job named {name!r} already exists "
                        "(remove it first, or pick another name)"
                    )
                conn.execute(sa.insert(cron_jobs).values(**values))
        except sa.exc.IntegrityError as exc:
            raise CronError(f"a cron job named {name!r} already exists") from exc
        return self.require(name)

    def remove(self, name: str) -> CronJob:
        """Delete a job and, in the same transaction, the owner's notices about it
        (``cron.notices``); returns what was removed."""
        import sqlalchemy as sa

        from vikingbot.cron.notices import forget_job
        from vikingbot.store.tables import cron_jobs

        job = self.require(name)
        with self.store.engine.begin() as conn:
            conn.execute(sa.delete(cron_jobs).where(cron_jobs.c.name == name))
            forget_job(conn, name, job.last_error)
        return job

    def set_enabled(self, name: str, enabled: bool) -> CronJob:
        """Enable (re-planning the next run from now) or disable a job."""
        job = self.require(name)
        if not enabled:
            return self.update(name, enabled=False, next_run_at=None)
        reason = schedule.problem(job)
        if reason is not None:
            raise CronError(f"cron job {name!r} cannot be enabled: {reason}")
        nxt = schedule.next_run(job, self.clock.now())
        if nxt is None:
            raise CronError(
                f"cron job {name!r} ({schedule.describe(job)}) has no run left; "
                "remove it and add a new one"
            )
        outcome = None if job.last_outcome in ("invalid", "interrupted") else _UNSET
        return self.update(name, enabled=True, next_run_at=nxt, last_outcome=outcome)

    def update(
        self,
        name: str,
        *,
        enabled: bool = _UNSET,
        last_run_at: datetime | None = _UNSET,
        next_run_at: datetime | None = _UNSET,
        last_outcome: str | None = _UNSET,
        last_error: str | None = _UNSET,
    ) -> CronJob:
        """Change the run-state columns of one job."""
        import sqlalchemy as sa

        from vikingbot.store.tables import cron_jobs

        values = {
            key: value
            for key, value in {
                "enabled": enabled,
                "last_run_at": last_run_at,
                "next_run_at": next_run_at,
                "last_outcome": last_outcome,
                "last_error": last_error,
            }.items()
            if value is not _UNSET
        }
        if values:
            with self.store.engine.begin() as conn:
                conn.execute(sa.update(cron_jobs).where(cron_jobs.c.name == name).values(**values))
        return self.require(name)
