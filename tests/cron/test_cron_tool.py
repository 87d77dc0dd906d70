"""The agent's cron tool: same jobs and same refusals as the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from vikingbot.config.schema import Config
from vikingbot.cron.jobs import CronJobs
from vikingbot.cron.tool import CronTool
from vikingbot.errors import ToolError
from vikingbot.session.types import SessionKey
from vikingbot.store.db import StateStore
from vikingbot.tools.base import ToolContext


def _ctx(store: StateStore, tmp_path: Path, **metadata: object) -> ToolContext:
    return ToolContext(
        workspace=tmp_path,
        session_key=SessionKey.parse("telegram:default:42"),
        config=Config(),
        store=store,
        metadata=dict(metadata),
    )


async def test_add_list_remove(sqlite_store: StateStore, tmp_path: Path) -> None:
    tool = CronTool()
    assert tool.name == "cron" and tool.read_only is False
    ctx = _ctx(sqlite_store, tmp_path, reply_to="telegram:42")
    out = await tool.run(
        {
            "action": "add",
            "name": "standup",
            "cron": "0 9 * * 1-5",
            "timezone": "Europe/Berlin",
            "prompt": "What is on my calendar today?",
        },
        ctx,
    )
    assert "Added cron job 'standup'" in out and "replies go to telegram:42" in out
    job = CronJobs(sqlite_store).require("standup")
    assert job.target == "telegram:42" and job.timezone == "Europe/Berlin"

    listing = await tool.run({"action": "list"}, ctx)
    assert "standup: cron 0 9 * * 1-5 (Europe/Berlin), scheduled" in listing
    assert "What is on my calendar today?" in listing

    assert await tool.run({"action": "remove", "name": "standup"}, ctx) == (
        "Removed cron job 'standup'."
    )
    assert await tool.run({"action": "list"}, ctx) == "No cron jobs."


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"action": "add", "name": "x", "prompt": "p"}, "exactly one of every, at or cron"),
        (
            {"action": "add", "name": "x", "every": "1h", "cron": "* * * * *", "prompt": "p"},
            "exactly one of",
        ),
        ({"action": "add", "name": "x", "every": "1h"}, "needs a prompt"),
        (
            {
                "action": "add",
                "name": "x",
                "cron": "0 9 * * *",
                "timezone": "Moon/Base",
                "prompt": "p",
            },
            "unknown IANA timezone",
        ),
        ({"action": "remove", "name": "ghost"}, "no cron job named 'ghost'"),
        ({"action": "remove"}, "needs a name"),
        ({"action": "explode"}, "must be one of"),
    ],
)
async def test_refusals_reach_the_model_as_tool_errors(
    sqlite_store: StateStore, tmp_path: Path, args: dict[str, object], message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        await CronTool().run(args, _ctx(sqlite_store, tmp_path))


async def test_add_without_timezone_takes_the_heartbeats(
    sqlite_store: StateStore, tmp_path: Path
) -> None:
    ctx = _ctx(sqlite_store, tmp_path)
    ctx.config.bot.heartbeat.timezone = "Asia/Tokyo"
    out = await CronTool().run(
        {"action": "add", "name": "tea", "cron": "0 15 * * *", "prompt": "Tea time?"}, ctx
    )
    assert "Added cron job 'tea'" in out
    assert CronJobs(sqlite_store).require("tea").timezone == "Asia/Tokyo"
