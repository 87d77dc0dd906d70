"""`vikingbot mcp ...` on a real server (mcp-server-time) and the config file it edits."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import Cli
from tests.support.mcp_servers import TIME, need


def test_add_list_probe_tools_trust_remove(cli: Cli, home: Path) -> None:
    command = need(TIME, "mcp-server-time")
    added = cli("mcp", "add", "time", "--", command, "--local-timezone", "UTC")
    assert added.exit_code == 0, added.output
    web = cli(
        "mcp", "add", "web", "--url", "http://127.0.0.1:9/mcp", "--header", "X-Key=k-secret-1"
    )
    assert web.exit_code == 0, web.output
    raw = json.loads((home / "config.json").read_text())
    assert raw["bot"]["tools"]["mcp_servers"]["time"] == {
        "command": command,
        "args": ["--local-timezone", "UTC"],
    }

    listed = json.loads(cli("mcp", "list", "--json").stdout)
    assert [(s["name"], s["type"], s["state"]) for s in listed["servers"]] == [
        ("time", "stdio", "not started"),
        ("web", "streamableHttp", "not started"),
    ]
    shown = cli("config", "get", "bot.tools.mcp_servers.web").stdout
    assert "k-secret-1" not in shown  # header values are masked wherever config is shown

    probe = json.loads(cli("mcp", "probe", "time", "--json").stdout)
    assert (probe["ok"], probe["tools"]) == (True, 2)
    bad = cli("mcp", "probe", "web")
    assert bad.exit_code == 1 and "MCP server 'web'" in bad.output
    unknown = cli("mcp", "probe", "tme")
    assert unknown.exit_code == 1 and "did you mean time?" in unknown.output

    tools = json.loads(cli("mcp", "tools", "time", "--json").stdout)["tools"]
    assert [(t["name"], t["unattended"]) for t in tools] == [
        ("mcp_time_convert_time", False),
        ("mcp_time_get_current_time", False),
    ]

    assert cli("mcp", "trust", "time").exit_code == 0
    pins = json.loads((home / "data" / "mcp" / "approved.json").read_text())
    assert pins["time"].endswith(f"{command} --local-timezone UTC")

    assert cli("mcp", "remove", "web").exit_code == 0
    raw = json.loads((home / "config.json").read_text())
    assert list(raw["bot"]["tools"]["mcp_servers"]) == ["time"]
    usage = cli("mcp", "add", "x")
    assert usage.exit_code == 2 and "either -- COMMAND" in usage.output
