"""MCP servers owned by a real gateway: eager start, a broken server named in /health and
told to the owner once, a chat turn calling a tool, every server process gone at stop."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import OWNER_ID, Home, login_url, poll
from tests.support.mcp_servers import TIME, need
from vikingbot.testing.fake_openai import reply, tool_call


def descendants(pid: int) -> dict[int, str]:
    """Every process under ``pid`` and its command line."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: dict[int, str] = {}
    frontier = {pid}
    while frontier:
        kids = {p for p, pp in parents.items() if pp in frontier}
        for kid in kids:
            try:
                found[kid] = Path(f"/proc/{kid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
        frontier = kids
    return found


def test_the_gateway_owns_its_mcp_servers(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    command = need(TIME, "mcp-server-time")
    home.write_config(
        tools={
            "auto_approve": ["mcp_time_*"],
            "mcp_servers": {
                "time": {"command": command, "eager": True},
                "gone": {"command": "/nonexistent/mcp-server", "eager": True},
            },
        }
    )
    gw = gateways(home)

    def ready() -> dict | None:
        health = gw.get("/health")
        states = {s["name"]: s["state"] for s in health["mcp"]}
        return health if states == {"time": "running", "gone": "failed"} else None

    health = poll(ready, "the eager MCP servers started (or failed)")
    assert health["status"] == "degraded"
    assert any("'gone'" in p and "command not found" in p for p in health["problems"])
    assert gw.proc is not None
    servers = [c for c in descendants(gw.proc.pid).values() if "mcp-server-time" in c]
    assert len(servers) == 1

    with httpx.Client(follow_redirects=True, timeout=30) as web:  # the dashboard's overview
        page = web.get(login_url(home))
        assert page.url.path.endswith("/ui/"), page.url
        card = page.text.split('id="mcp"', 1)[1].split("</section>", 1)[0]
        assert "time" in card and "running, 2 tools" in card
        assert "gone" in card and "command not found" in card

    told = home.telegram.wait_for_sent(1, timeout=60)
    assert "MCP server gone cannot be used" in told[0]["text"]

    # a chat turn uses the running server (no second process)
    home.llm.script(
        [tool_call("mcp_time_get_current_time", {"timezone": "UTC"}), reply("It is late.")]
    )
    home.telegram.push_text(chat_id=OWNER_ID, user_id=OWNER_ID, text="What time is it?")
    sent = home.telegram.wait_for_sent(2, timeout=60)
    assert sent[1]["text"] == "It is late."
    assert '"timezone": "UTC"' in home.llm.requests[1].text
    assert len([c for c in descendants(gw.proc.pid).values() if "mcp-server-time" in c]) == 1
    assert [m["text"] for m in home.telegram.sent].count(told[0]["text"]) == 1  # told once

    pids = [p for p, c in descendants(gw.proc.pid).items() if "mcp-server-time" in c]
    assert gw.stop() == 0
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]
