"""A server that never answers ``initialize`` costs one turn's wait, then is backed off."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from tests.mcp.conftest import mcp_config
from vikingbot.mcp.client import START_BACKOFF_S
from vikingbot.mcp.hub import McpHub

MARK = f"stuck-mcp-{os.getpid()}"
STUCK = {"command": sys.executable, "args": ["-c", "import time; time.sleep(3600)", MARK]}


def alive() -> int:
    """Processes still running with this test's mark in their command line."""
    found = 0
    for proc in Path("/proc").iterdir():
        try:
            found += proc.name.isdigit() and MARK.encode() in (proc / "cmdline").read_bytes()
        except OSError:
            continue
    return found


async def test_a_server_stuck_in_initialize_costs_only_the_first_turn_a_wait(
    tmp_path: Path,
) -> None:
    config = mcp_config("http://127.0.0.1:9", {"stuck": STUCK, "also": dict(STUCK)})
    hub = McpHub(config, environ={"PATH": "/usr/bin:/bin"}, logs=tmp_path, turn_wait_s=1.0)
    took: list[float] = []
    try:
        for _ in range(6):
            began = time.monotonic()
            tools = await hub.tools_for(unattended=False)
            took.append(time.monotonic() - began)
            assert tools == {}
        states = {s.name: s for s in hub.status()}
    finally:
        await hub.aclose()
    assert alive() == 0  # stopped with the hub, at once (no wait for an answer)
    assert 0.9 < took[0] < 10  # the first turn waits its turn_wait_s for both at once
    assert max(took[1:]) < 0.5, took  # later turns go without them, at once
    assert all("within a turn's wait" in str(s.problem) for s in states.values())
    assert START_BACKOFF_S >= 30
