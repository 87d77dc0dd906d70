"""`vikingbot mcp serve` (issue 47): the official ``mcp`` client over stdio, against the real
command in a child process, on a temporary home (no gateway: plans run here)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.support.home import _migrated_database
from vikingbot.fsutil import lock_path
from vikingbot.store.db import StateStore

TEMPLATE = (
    "# Heartbeat Tasks\n\n## Active Tasks\n\n- every: 1d title: Plants task: Water the plants\n"
)


def _text(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def test_the_mcp_client_plans_adds_and_completes_over_stdio(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = home / "data" / "workspace" / "shared"
    ws.mkdir(parents=True)
    (home / "config.json").write_text("{}")
    shutil.copyfile(_migrated_database(), home / "data" / "state.db")  # no migrations to wait for
    heartbeat = ws / "HEARTBEAT.md"
    heartbeat.write_text(TEMPLATE)
    env = {**os.environ, "VIKINGBOT_HOME": str(home)}
    env.pop("VIKINGBOT_CONFIG", None)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "vikingbot", "mcp", "serve"], env=env
    )
    async with Client(params, read_timeout_seconds=60) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {
            "read_inbox",
            "heartbeat_plan",
            "add_heartbeat_entry",
            "complete_heartbeat_entry",
            "run_heartbeat_now",
            "message_owner",
            "search_history",
        }
        plan = _text(await client.call_tool("heartbeat_plan", {"workspace": "shared"}))
        assert any("Plants" in json.dumps(d) for d in plan["decisions"]), plan

        # the user's editor saves while the add waits for the file's lock: nothing is lost
        with lock_path(heartbeat).open("a+") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            call = asyncio.ensure_future(
                client.call_tool(
                    "add_heartbeat_entry",
                    {"workspace": "shared", "text": "every: 1h title: CI task: Check CI"},
                )
            )
            await asyncio.wait({call}, timeout=0.5)  # bounded: the call cannot finish yet
            assert not call.done()
            heartbeat.write_text(heartbeat.read_text() + "- every: 1w title: Mum task: Call mum\n")
            fcntl.flock(held, fcntl.LOCK_UN)
        assert _text(await call)["added"] == "every: 1h title: CI task: Check CI"
        text = heartbeat.read_text()
        assert (
            "- every: 1h title: CI task: Check CI" in text
            and "- every: 1w title: Mum task: Call mum" in text
        )
        assert "Water the plants" in text

        done = await client.call_tool(
            "complete_heartbeat_entry",
            {"workspace": "shared", "entry": "every: 1w title: Mum task: Call mum"},
        )
        assert _text(done)["completed"] == "every: 1w title: Mum task: Call mum"
        assert "## Completed" in heartbeat.read_text()

        missing = await client.call_tool("heartbeat_plan", {"workspace": "../etc"})
        assert missing.is_error and "no workspace" in missing.content[0].text
        assert _text(await client.call_tool("read_inbox", {})) == []

    store = StateStore.open(f"sqlite:///{home / 'data' / 'state.db'}")
    try:
        rows = [
            (e["action"], e["outcome"]) for e in store.audit_events(50) if e["actor"] == "mcp:stdio"
        ]
    finally:
        store.close()
    assert ("mcp.add_heartbeat_entry", "ok") in rows
    assert ("mcp.complete_heartbeat_entry", "ok") in rows
    assert ("mcp.heartbeat_plan", "refused") in rows
