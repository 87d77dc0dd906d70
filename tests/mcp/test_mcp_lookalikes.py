"""Server names match approvals exactly as written, never across a separator; an ACP
session of unattended turns gets only the servers ``safe_tools`` names a tool of."""

from __future__ import annotations

import pytest

from vikingbot.agent.acp_mcp import session_servers
from vikingbot.agent.approval import McpAction, decide
from vikingbot.config.schema import Config
from vikingbot.mcp.naming import names_a_tool_of, tool_name


def unattended(server: str, tool: str, safe: list[str]) -> str:
    config = Config.model_validate({"bot": {"heartbeat": {"safeTools": safe}}})
    name = tool_name(server, tool)
    mcp = McpAction(server, tool, "cmd", None)
    return decide(config, name, read_only=False, unattended=True, mcp=mcp).outcome


@pytest.mark.parametrize(
    ("server", "tool", "entry", "outcome"),
    [
        ("a.b", "get", "mcp_a_b_*", "deny"),  # a look-alike of the sanitised name
        ("a.b", "get", "mcp_a.b_*", "approve"),  # the server's name as written
        ("a.b", "get", "mcp__a.b__*", "approve"),
        ("time__shell", "run", "mcp__time__*", "deny"),  # across the `__` separator
        ("time", "shell__run", "mcp__time__*", "approve"),  # its own server, exactly
        ("time", "now", "mcp__time__*", "approve"),
        ("time", "now", "mcp__time__now", "approve"),
        ("time", "now", "mcp_time_now", "approve"),
        ("a_b", "list", "mcp_a_*", "deny"),
    ],
)
def test_a_server_wildcard_names_one_server_exactly(
    server: str, tool: str, entry: str, outcome: str
) -> None:
    assert unattended(server, tool, [entry]) == outcome


def test_an_acp_heartbeat_session_gets_only_servers_safe_tools_names() -> None:
    servers = {
        n: {"command": "srv", "args": [n], "env": {"TOKEN": f"t-{n}"}}
        for n in ("time", "time__shell", "gh", "a.b")
    }
    config = Config.model_validate(
        {
            "bot": {
                "tools": {"mcpServers": servers},
                "heartbeat": {"safeTools": ["mcp__time__now", "mcp_a.b_*", "read_file"]},
            }
        }
    )
    given = session_servers(config, {}, unattended=True, transports=frozenset({"stdio"}))
    assert sorted(s.name for s in given) == ["a.b", "time"]
    attended = session_servers(config, {}, unattended=False, transports=frozenset({"stdio"}))
    assert len(attended) == 4
    assert not names_a_tool_of("mcp__time__shell__run", "time")
