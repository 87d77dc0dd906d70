"""Nobody watching: no MCP tool is safe by default, approvals bind to the server as
configured, and bot.heartbeat.mcp_servers decides which servers a heartbeat connects."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.mcp.conftest import Agent, mcp_config
from tests.support.mcp_servers import faults, time_server
from vikingbot.agent.approval import decide_action
from vikingbot.agent.loop import action_of
from vikingbot.session.types import SessionKey
from vikingbot.store.db import StateStore
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

KEY = SessionKey("slack", "T1", "C1")


def unattended(workspace: Path) -> dict[str, object]:
    return {"heartbeat": True, "unattended": True, "run_id": "r1", "workspace": str(workspace)}


async def test_no_mcp_tool_is_safe_by_default_and_the_refusal_is_audited(
    fake_openai: FakeOpenAI,
    make_agent: Callable[..., Agent],
    workspace: Path,
    sqlite_store: StateStore,
) -> None:
    # mcp-server-time marks its tools readOnlyHint: true; that changes nothing here
    fake_openai.script(
        [
            tool_call("mcp_time_get_current_time", {"timezone": "UTC"}),
            reply("ok"),
            tool_call("mcp_time_get_current_time", {"timezone": "UTC"}),
            reply("ok"),
        ]
    )
    loop, hub = make_agent(mcp_config(fake_openai.base_url, {"time": time_server()}))
    first = await loop.run_turn("tick", KEY, unattended(workspace))
    assert not any(n.startswith("mcp_") for n in fake_openai.requests[0].tool_names)
    assert [s.starts for s in hub.status()] == [0]  # nothing could be approved: not started
    assert not first.tool_calls[0].approved

    # one of its tools approved: the server runs, and its other tool is still refused
    only_one = mcp_config(
        fake_openai.base_url,
        {"time": time_server()},
        heartbeat={"safeTools": ["mcp_time_convert_time"]},
    )
    loop.reconfigure(only_one)
    hub.reconfigure(only_one)
    second = await loop.run_turn("tick", KEY, unattended(workspace))
    offered = fake_openai.requests[2].tool_names
    assert "mcp_time_convert_time" in offered and "mcp_time_get_current_time" not in offered
    assert not second.tool_calls[0].approved
    tools = await loop.turn_tools({})
    verdict = decide_action(
        only_one, action_of(tools["mcp_time_get_current_time"]), unattended=True
    )
    assert not verdict.approved and "not in bot.heartbeat.safe_tools" in verdict.reason
    denied = sqlite_store.audit_events(action="tool.deny")
    assert [e["subject"] for e in denied] == ["mcp_time_get_current_time"] * 2
    assert all(e["actor"] == "heartbeat" for e in denied)
    assert '"timezone": "UTC"' in denied[0]["details"]["arguments"]


async def test_a_server_wildcard_approves_its_tools_until_the_entry_is_repointed(
    fake_openai: FakeOpenAI,
    make_agent: Callable[..., Agent],
    workspace: Path,
    sqlite_store: StateStore,
) -> None:
    safe = {"safeTools": ["mcp_time_*"]}
    fake_openai.script(
        [
            tool_call("mcp_time_get_current_time", {"timezone": "UTC"}),
            reply("ok"),
            tool_call("mcp_time_ok", {"text": "I am not the time server"}),
            reply("refused"),
        ]
    )
    loop, hub = make_agent(
        mcp_config(fake_openai.base_url, {"time": time_server()}, heartbeat=safe)
    )
    first = await loop.run_turn("tick", KEY, unattended(workspace))
    assert first.tool_calls[0].approved and '"timezone": "UTC"' in first.tool_calls[0].result

    # the same entry name, now pointing at another program: the approval does not follow it
    moved = mcp_config(fake_openai.base_url, {"time": faults()}, heartbeat=safe)
    loop.reconfigure(moved)
    hub.reconfigure(moved)
    second = await loop.run_turn("tick", KEY, unattended(workspace))
    # not offered (unattended turns see only what may run), and refused when called anyway
    assert "mcp_time_ok" not in fake_openai.requests[2].tool_names
    (call,) = second.tool_calls
    assert not call.approved
    tools = await loop.turn_tools({})
    verdict = decide_action(moved, action_of(tools["mcp_time_ok"]), unattended=True)
    assert not verdict.approved
    assert "approvals do not move with a repointed entry" in verdict.reason
    assert "vikingbot mcp trust time" in verdict.reason


async def test_heartbeat_mcp_servers_limits_what_an_unattended_turn_connects(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path
) -> None:
    fake_openai.script([reply("HEARTBEAT_OK"), reply("hello")])
    config = mcp_config(fake_openai.base_url, {"time": time_server()}, heartbeat={"mcpServers": []})
    loop, hub = make_agent(config)
    await loop.run_turn("tick", KEY, unattended(workspace))
    assert not any(n.startswith("mcp_") for n in fake_openai.requests[0].tool_names)
    assert [s.starts for s in hub.status()] == [0]  # not even started
    await loop.run_turn("hi", KEY, {"workspace": str(workspace)})  # someone is there
    assert "mcp_time_get_current_time" in fake_openai.requests[1].tool_names
