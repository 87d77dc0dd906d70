"""A server still starting when a turn stops waiting (issue 42): the turn goes without
it, and its start, which fails later, is neither destroyed pending nor left with an
exception nobody took (the gateway's terminal showed "Task was destroyed but it is
pending!")."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from pathlib import Path
from typing import Any

from vikingbot.config.schema import Config
from vikingbot.mcp.hub import McpHub


async def test_a_start_the_turn_did_not_wait_for_ends_quietly(tmp_path: Path) -> None:
    gate = tmp_path / "go"
    script = tmp_path / "slow_server.py"
    # waits for the test's word, then exits without speaking MCP: the start fails
    script.write_text(
        "import os, sys, time\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)\n"
        "sys.exit(1)\n"
    )
    config = Config.model_validate(
        {
            "bot": {
                "tools": {
                    "mcpServers": {"slow": {"command": sys.executable, "args": [str(script)]}}
                }
            }
        }
    )
    loop = asyncio.get_running_loop()
    trouble: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: trouble.append(context))
    hub = McpHub(
        config,
        environ=dict(os.environ),
        logs=tmp_path / "logs",
        pins=tmp_path / "approved.json",
        turn_wait_s=0.05,
    )
    told = asyncio.Event()
    hub.on_problem = lambda _server, _problem: told.set()
    try:
        assert await hub.tools_for(unattended=False) == {}  # the turn went without it
        gate.touch()
        await asyncio.wait_for(told.wait(), 60)  # the start failed, and was told once
        for _ in range(3):
            await asyncio.sleep(0)  # let the done callbacks run
        gc.collect()
        assert trouble == []
    finally:
        await hub.aclose()
        loop.set_exception_handler(None)
