"""A misbehaving server (tests/support/mcp_faults.py, on the SDK): each fault costs one call,
never the turn, and the server is back for the next call."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.mcp.conftest import Agent, mcp_config
from tests.support.mcp_servers import faults
from vikingbot.mcp.results import MAX_RESULT_CHARS
from vikingbot.mcp.stdio import MAX_LINE
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

KEY = SessionKey("cli", "default", "local")


async def yes(name: str, args: dict[str, Any]) -> bool:
    return True


async def test_a_crash_mid_call_fails_that_call_and_the_server_is_restarted(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    fake_openai.script(
        [
            tool_call("mcp_f_crash", {}),
            tool_call("mcp_f_ok", {"text": "back again"}),
            reply("done"),
        ]
    )
    config = mcp_config(fake_openai.base_url, {"f": faults({"FAULT_STARTS": str(starts)})})
    loop, hub = make_agent(config, approval_callback=yes)
    result = await loop.run_turn("go", KEY, {"workspace": str(workspace)})
    crash, ok = result.tool_calls
    assert crash.error and "MCP server 'f'" in crash.result
    assert (ok.error, ok.result) == (False, "back again")
    assert result.ended == "final"
    assert len(starts.read_text().split()) == 2  # started, died, started again
    (status,) = hub.status()
    assert (status.state, status.starts) == ("running", 2)


async def test_a_hung_call_is_cut_at_tool_timeout_and_the_turn_goes_on(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path
) -> None:
    fake_openai.script(
        [tool_call("mcp_f_hang", {}), tool_call("mcp_f_ok", {"text": "next"}), reply("done")]
    )
    config = mcp_config(fake_openai.base_url, {"f": faults(toolTimeoutS=1)})
    loop, _ = make_agent(config, approval_callback=yes)
    await loop.turn_tools({})  # started before the clock below
    began = time.monotonic()
    result = await loop.run_turn("go", KEY, {"workspace": str(workspace)})
    hang, ok = result.tool_calls
    assert hang.error and "gave no answer within 1 s" in hang.result
    assert ok.result == "next"
    assert time.monotonic() - began < 10


async def test_garbage_on_stdout_is_skipped(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path
) -> None:
    fake_openai.script([tool_call("mcp_f_garbage", {}), reply("done")])
    config = mcp_config(fake_openai.base_url, {"f": faults({"FAULT_BANNER": "1"})})
    loop, _ = make_agent(config, approval_callback=yes)
    result = await loop.run_turn("go", KEY, {"workspace": str(workspace)})
    (call,) = result.tool_calls
    assert call.result == "answered after garbage"


async def test_big_output_reaches_the_model_capped_and_a_huge_one_fails_at_once(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path
) -> None:
    fake_openai.script(
        [
            tool_call("mcp_f_flood", {"mb": 4}),
            tool_call("mcp_f_flood", {"mb": 50}),
            tool_call("mcp_f_ok", {"text": "still here"}),
            reply("done"),
        ]
    )
    config = mcp_config(fake_openai.base_url, {"f": faults(toolTimeoutS=120)})
    loop, _ = make_agent(config, approval_callback=yes)
    began = time.monotonic()
    result = await loop.run_turn("go", KEY, {"workspace": str(workspace)})
    big, huge, ok = result.tool_calls
    assert not big.error
    assert len(big.result) < MAX_RESULT_CHARS + 200
    assert big.result.endswith(f"[... result truncated at {MAX_RESULT_CHARS} characters]")
    # over MAX_LINE: read through, never held whole, and the call fails with the reason
    assert huge.error and f"over {MAX_LINE // (1024 * 1024)} MiB" in huge.result
    assert ok.result == "still here"
    assert time.monotonic() - began < 60  # not the call's 120 s timeout


async def test_a_changed_tool_list_is_offered_on_the_next_turn(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path
) -> None:
    fake_openai.script([tool_call("mcp_f_grow", {}), reply("grown"), reply("next turn")])
    loop, _ = make_agent(mcp_config(fake_openai.base_url, {"f": faults()}), approval_callback=yes)
    await loop.run_turn("grow", KEY, {"workspace": str(workspace)})
    assert "mcp_f_added" not in fake_openai.requests[0].tool_names
    deadline = time.monotonic() + 10  # the notification travels on a stream of its own
    while "mcp_f_added" not in await loop.turn_tools({}) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await loop.run_turn("again", KEY, {"workspace": str(workspace)})
    assert "mcp_f_added" in fake_openai.requests[-1].tool_names


async def test_two_tools_that_sanitise_to_one_name_are_both_refused(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path
) -> None:
    fake_openai.script([reply("ok")])
    config = mcp_config(fake_openai.base_url, {"f": faults({"FAULT_DUPES": "1"})})
    loop, hub = make_agent(config)
    await loop.run_turn("hi", KEY, {"workspace": str(workspace)})
    names = fake_openai.requests[0].tool_names
    assert "mcp_f_ok" in names and "mcp_f_a_b" not in names
    (problem,) = hub.problems()
    assert "'a.b'" in problem and "'a b'" in problem and "mcp_f_a_b" in problem


async def test_an_idle_server_is_stopped_and_started_again_when_needed(
    fake_openai: FakeOpenAI, make_agent: Callable[..., Agent], workspace: Path, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    fake_openai.script(
        [
            tool_call("mcp_f_ok", {"text": "one"}),
            reply("a"),
            tool_call("mcp_f_ok", {"text": "two"}),
            reply("b"),
        ]
    )
    config = mcp_config(fake_openai.base_url, {"f": faults({"FAULT_STARTS": str(starts)})})
    config.bot.tools.mcp_idle_s = 1
    loop, hub = make_agent(config, approval_callback=yes)
    first = await loop.run_turn("go", KEY, {"workspace": str(workspace)})
    assert first.tool_calls[0].result == "one", first.tool_calls
    (pid,) = [int(p) for p in starts.read_text().split()]
    deadline = time.monotonic() + 30  # idle 1 s, then the session and its process end

    def stopped() -> bool:
        return hub.status()[0].state == "stopped" and not Path(f"/proc/{pid}").exists()

    while not stopped() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert stopped()
    result = await loop.run_turn("again", KEY, {"workspace": str(workspace)})
    assert result.tool_calls[0].result == "two"
    assert hub.status()[0].starts == 2
