"""The agent's ``cron`` tool: list, add and remove scheduled jobs (not read-only).

Jobs added here are the same as ``vikingbot cron add``: validated the same way,
refused with the same messages. A job added from a chat delivers to that chat
unless the model names another target (delivery still validates every target).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from vikingbot.config.zones import default_zone_name
from vikingbot.cron import schedule
from vikingbot.cron.jobs import CronJobs
from vikingbot.cron.types import CronJob, status_of
from vikingbot.errors import CronError, ToolError
from vikingbot.tools.base import Tool, ToolContext


def _line(job: CronJob) -> str:
    nxt = f"next {job.next_run_at:%Y-%m-%d %H:%M} UTC" if job.next_run_at else "no next run"
    text = f"- {job.name}: {schedule.describe(job)}, {status_of(job)}, {nxt}"
    if job.last_outcome:
        text += f", last: {job.last_outcome}"
    if job.last_error:
        text += f" ({job.last_error})"
    return text + f"\n  prompt: {job.prompt}"


class CronTool(Tool):
    name: ClassVar[str] = "cron"
    description: ClassVar[str] = (
        "Manage scheduled jobs: each job runs a prompt through the agent on a schedule, "
        "unattended, and delivers the reply. action=list shows jobs; action=add needs name, "
        "prompt and exactly one of every (e.g. '30m', '2h', '1d'), at (ISO time, one shot) "
        "or cron (5-field expression, with timezone e.g. 'Europe/Berlin'); "
        "action=remove needs name."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["list", "add", "remove"]},
            "name": {"type": "string", "description": "Job name: letters, digits, . _ -"},
            "prompt": {"type": "string", "description": "What the agent should do each run."},
            "every": {"type": "string", "description": "Interval, e.g. 30m, 2h, 1d."},
            "at": {"type": "string", "description": "One-shot ISO time, e.g. 2026-03-01T09:00."},
            "cron": {"type": "string", "description": "5-field cron expression, e.g. 0 9 * * 1-5"},
            "timezone": {
                "type": "string",
                "description": "IANA timezone (default: the heartbeat's).",
            },
            "target": {
                "type": "string",
                "description": "Where replies go (default: this chat), e.g. owner, slack:C123.",
            },
        },
        "required": ["action"],
        "additionalProperties": False,
    }
    read_only: ClassVar[bool] = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        args = self.check_args(args)
        if ctx.store is None:
            raise ToolError("cron: no state database in this context")
        jobs = CronJobs(ctx.store, getattr(ctx.store, "clock", None))
        try:
            return await asyncio.to_thread(self._act, jobs, args, ctx)
        except CronError as exc:
            raise ToolError(f"cron: {exc}") from exc

    def _act(self, jobs: CronJobs, args: dict[str, Any], ctx: ToolContext) -> str:
        action = args["action"]
        if action == "list":
            found = jobs.list()
            if not found:
                return "No cron jobs."
            return "\n".join(_line(j) for j in found)
        name = args.get("name")
        if not name:
            raise ToolError(f"cron: action={action} needs a name")
        if action == "remove":
            jobs.remove(name)
            return f"Removed cron job {name!r}."
        kinds = [k for k in ("every", "at", "cron") if args.get(k)]
        if len(kinds) != 1:
            raise ToolError("cron: action=add needs exactly one of every, at or cron")
        kind = kinds[0]
        if not args.get("prompt"):
            raise ToolError("cron: action=add needs a prompt")
        target = args.get("target") or ctx.metadata.get("reply_to") or None
        job = jobs.add(
            name,
            kind,
            str(args[kind]),
            str(args["prompt"]),
            timezone=str(
                args.get("timezone") or default_zone_name(ctx.config.bot.heartbeat.timezone)
            ),
            target=target,
        )
        when = f"{job.next_run_at:%Y-%m-%d %H:%M} UTC" if job.next_run_at else "never"
        return (
            f"Added cron job {name!r} ({schedule.describe(job)}); first run {when}; "
            f"replies go to {job.target or 'the default heartbeat target'}."
        )
