"""Cron: scheduled agent jobs (``at``, ``every``, ``cron``) kept in the state store.

``schedule`` holds the pure due maths, ``jobs`` the ``cron_jobs`` repository,
``service`` the runner, ``tool`` the agent's ``cron`` tool.
"""

from vikingbot.cron.jobs import CronJobs
from vikingbot.cron.schedule import next_run
from vikingbot.cron.service import CronService
from vikingbot.cron.types import CronJob, CronRun

__all__ = ["CronJob", "CronJobs", "CronRun", "CronService", "next_run"]
