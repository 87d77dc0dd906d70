"""MCP servers we did not write, through the agent loop: mcp-server-time (PyPI, stdio) and
server-everything (npm, stdio and Streamable HTTP)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.mcp.conftest import Agent, mcp_config
from tests.support.mcp_servers import everything, everything_http, time_server
from vikingbot.session.types import SessionKey
from vikingbot.store.db import StateStore
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

KEY = SessionKey("cli", "default", "local")


async def yes(name: str, args: dict[str, Any]) -> bool:
    return True


async def test_a_pypi_server_answers_through_the_loop_and_every_call_is_audited(
    fake_openai: FakeOpenAI,
    make_agent: Callable[..., Agent],
    workspace: Path,
    sqlite_store: StateStore,
) -> None:
    fake_openai.script(
        [tool_call("mcp_time_get_current_time", {"timezone": "Europe/Berlin"}), reply("done")]
    )
    loop, _ = make_agent(
        mcp_config(fake_openai.base_url, {"time": time_server()}), approval_callback=yes
    )
    result = await loop.run_turn("what time is it?", KEY, {"workspace": str(workspace)})

    offered = set(fake_openai.requests[0].tool_names)
    assert {"mcp_time_get_current_time", "mcp_time_convert_time", "read_file"} <= offered
    (call,) = result.tool_calls
    assert call.approved and not call.error
    assert '"timezone": "Europe/Berlin"' in call.result
    assert "Europe/Berlin" in fake_openai.requests[1].text  # the result went back to the model
    (event,) = sqlite_store.audit_events(action="tool.approve")
    assert event["subject"] == "mcp_time_get_current_time"
    assert event["details"]["mcp_server"] == "time"
    assert event["details"]["mcp_tool"] == "get_current_time"
    assert "Europe/Berlin" in event["details"]["arguments"]
    assert event["details"]["mcp_identity"].endswith("mcp-server-time")


async def test_an_npm_server_over_stdio_text_and_an_image_placeholder(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path
) -> None:
    fake_openai.script(
        [
            tool_call("mcp_every_echo", {"message": "hello from vikingbot"}),
            tool_call("mcp_every_get-tiny-image", {}),
            tool_call("mcp_every_get-sum", {"a": 2, "b": "three"}),  # the server says isError
            reply("done"),
        ]
    )
    loop, _ = make_agent(
        mcp_config(fake_openai.base_url, {"every": everything()}), approval_callback=yes
    )
    result = await loop.run_turn("echo", KEY, {"workspace": str(workspace)})
    echo, image, bad = result.tool_calls
    assert echo.result == "Echo: hello from vikingbot"
    assert "[image: image/png, about" in image.result and len(image.result) < 1000
    assert bad.error and bad.result.startswith("Error:")


async def test_an_npm_server_over_streamable_http(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path
) -> None:
    with everything_http() as url:
        fake_openai.script([tool_call("mcp_web_echo", {"message": "over http"}), reply("ok")])
        config = mcp_config(
            fake_openai.base_url, {"web": {"url": url, "headers": {"X-Api-Key": "k-123456"}}}
        )
        loop, hub = make_agent(config, approval_callback=yes)
        result = await loop.run_turn("echo", KEY, {"workspace": str(workspace)})
        (call,) = result.tool_calls
        assert call.result == "Echo: over http"
        (status,) = hub.status()
        assert (status.kind, status.state) == ("streamableHttp", "running")


async def test_a_server_that_cannot_start_leaves_the_others_and_names_itself(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path
) -> None:
    told: list[tuple[str, str]] = []
    servers = {
        "time": time_server(),
        "gone": {"command": "/nonexistent/mcp-server"},
        "nokey": {**time_server(), "env": {"TOKEN": "${VIKINGBOT_TEST_UNSET_VAR}"}},
        "closed": {"url": "http://127.0.0.1:9/mcp"},
    }
    fake_openai.script([reply("fine"), reply("still fine")])
    loop, hub = make_agent(mcp_config(fake_openai.base_url, servers))
    hub.on_problem = lambda server, problem: told.append((server, problem))
    for _ in range(2):
        result = await loop.run_turn("hi", KEY, {"workspace": str(workspace)})
        assert result.ended == "final"
    names = set(fake_openai.requests[0].tool_names)
    assert "mcp_time_get_current_time" in names
    assert not any(n.startswith(("mcp_gone_", "mcp_nokey_", "mcp_closed_")) for n in names)
    problems = "\n".join(hub.problems())
    assert "'gone'" in problems and "command not found" in problems
    assert "VIKINGBOT_TEST_UNSET_VAR is not set" in problems
    assert "bot.tools.mcp_servers.nokey.env.TOKEN" in problems
    assert "'closed'" in problems
    assert sorted(s for s, _ in told) == ["closed", "gone", "nokey"]  # once each, two turns
