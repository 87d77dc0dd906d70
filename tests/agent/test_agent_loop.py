"""The built-in loop end to end over the fake servers: tools, limits, errors, history."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.config.schema import Config
from vikingbot.errors import NotConfiguredError
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_anthropic import FakeAnthropic
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply, tool_call

KEY = SessionKey("cli", "default", "local")


def meta(workspace: Path, **extra: Any) -> dict[str, Any]:
    return {"workspace": str(workspace), **extra}


async def yes(name: str, args: dict[str, Any]) -> bool:
    return True


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_multi_step_tool_turn(
    kind: str,
    fake_openai: FakeOpenAI,
    fake_anthropic: FakeAnthropic,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    sessions: SessionStore,
    workspace: Path,
) -> None:
    fake = fake_openai if kind == "openai" else fake_anthropic
    fake.script(
        [
            tool_call("write_file", {"path": "notes.md", "content": "buy milk"}),
            tool_call("read_file", {"path": "notes.md"}),
            reply("Noted: buy milk.", tokens_in=100, tokens_out=5),
        ]
    )
    loop = make_loop(agent_config(fake.base_url, kind), approval_callback=yes)
    result = await loop.run_turn("remember to buy milk", KEY, meta(workspace))

    assert (result.text, result.ended, result.error) == ("Noted: buy milk.", "final", None)
    assert result.model_calls == 3 == len(fake.requests)
    assert [(c.name, c.approved, c.error) for c in result.tool_calls] == [
        ("write_file", True, False),
        ("read_file", True, False),
    ]
    assert result.tool_calls[1].result == "buy milk"
    assert result.wrote is True
    assert result.tokens_out >= 5 and result.tokens_in >= 100
    assert (workspace / "notes.md").read_text() == "buy milk"

    first = fake.requests[0]
    assert "I am Ragnar, a careful assistant." in first.system
    assert first.last_user_text == "remember to buy milk"
    assert {"read_file", "write_file", "exec", "message"} <= set(first.tool_names)
    assert "buy milk" in fake.requests[2].text  # the tool result went back to the model

    history = sessions.read_messages(KEY)
    assert [m.role for m in history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert history[1].tool_calls and history[1].tool_calls[0]["name"] == "write_file"
    assert history[-1].content == "Noted: buy milk."


async def test_history_window_is_sent_on_the_next_turn(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    fake_openai.script([tool_call("list_dir", {}), reply("Two files."), reply("Yes.")])
    loop = make_loop(agent_config(fake_openai.base_url, history_window=10))
    await loop.run_turn("what is here?", KEY, meta(workspace))
    await loop.run_turn("sure?", KEY, meta(workspace))
    roles = [m["role"] for m in fake_openai.requests[2].messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]


async def test_turn_limit_ends_with_one_call_without_tools(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    fake_openai.script(
        [tool_call("list_dir", {}), tool_call("list_dir", {}), reply("Stopping here.")]
    )
    loop = make_loop(agent_config(fake_openai.base_url, max_tool_iterations=2))
    result = await loop.run_turn("explore forever", KEY, meta(workspace))
    assert result.ended == "turn-limit"
    assert result.text == "Stopping here."
    assert result.model_calls == 3
    assert len(result.tool_calls) == 2
    last = fake_openai.requests[-1]
    assert last.tool_choice == "none"
    assert "tool-call limit" in last.last_user_text
    assert fake_openai.requests[0].tool_choice == "auto"


async def test_tool_failures_go_back_to_the_model(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    fake_openai.script(
        [
            tool_call("read_file", {"path": "missing.md"}),
            tool_call("no_such_tool", {}),
            tool_call("read_file", {}),
            tool_call("exec", {"command": "rm -rf /"}),
            reply("I could not do it."),
        ]
    )
    loop = make_loop(agent_config(fake_openai.base_url), approval_callback=yes)
    result = await loop.run_turn("try things", KEY, meta(workspace))
    assert result.ended == "final"
    results = [c.result for c in result.tool_calls]
    assert results[0] == "Error: missing.md: no such file"
    assert results[1].startswith("Error: there is no tool 'no_such_tool'")
    assert results[2] == "Error: read_file: missing required argument(s): path"
    assert results[3].startswith("Error: exec: blocked: recursive delete")
    assert all(c.error for c in result.tool_calls)
    assert result.wrote is False
    tool_msgs = [m for m in fake_openai.requests[-1].messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == results


async def test_a_crashing_plugin_tool_does_not_end_the_turn(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    from vikingbot.tools.base import Tool, ToolContext

    class Flaky(Tool):
        name = "flaky"
        description = "breaks"
        read_only = True

        async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
            raise KeyError("boom")

    fake_openai.script([tool_call("flaky", {}), reply("Sorry, that broke.")])
    loop = make_loop(agent_config(fake_openai.base_url), tools={"flaky": Flaky()})
    result = await loop.run_turn("go", KEY, meta(workspace))
    assert result.text == "Sorry, that broke."
    assert result.tool_calls[0].result == "Error: flaky failed: KeyError: 'boom'"


async def test_interactive_writes_need_approval(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    asked: list[str] = []

    async def no(name: str, args: dict[str, Any]) -> bool:
        asked.append(f"{name}({args.get('command')})")
        return False

    fake_openai.script([tool_call("exec", {"command": "touch x"}), reply("Fine.")])
    loop = make_loop(agent_config(fake_openai.base_url), approval_callback=no)
    result = await loop.run_turn("make x", KEY, meta(workspace))
    assert asked == ["exec(touch x)"]
    assert result.tool_calls[0].approved is False
    assert result.tool_calls[0].result.startswith("Tool call refused: exec was declined")
    assert not (workspace / "x").exists()
    assert result.wrote is False


async def test_provider_errors_end_the_turn_without_raising(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    sessions: SessionStore,
    workspace: Path,
) -> None:
    fake_openai.script([error(401)])
    loop = make_loop(agent_config(fake_openai.base_url))
    result = await loop.run_turn("hello?", KEY, meta(workspace))
    assert result.ended == "error"
    assert result.text is None
    assert result.error == (
        "the openai API key was rejected (401); set bot.providers.openai.api_key or OPENAI_API_KEY"
    )
    # An interactive prompt is kept, so the user's words are not lost.
    assert [(m.role, m.content) for m in sessions.read_messages(KEY)] == [("user", "hello?")]


async def test_no_provider_configured_raises(
    make_loop: Callable[..., BuiltinLoop], agent_config: Callable[..., Config], workspace: Path
) -> None:
    loop = make_loop(Config())
    with pytest.raises(NotConfiguredError, match=r"set bot\.agents\.provider"):
        await loop.run_turn("hi", KEY, meta(workspace))


async def test_turn_timeout(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    fake_openai.script([reply("too late", delay_s=0.6)])
    loop = make_loop(agent_config(fake_openai.base_url))
    result = await loop.run_turn("hi", KEY, meta(workspace, timeout_s=0.2))
    assert result.ended == "timeout"
    assert result.error == "the turn did not finish within 0.2s"


async def test_cancelled_turn_releases_the_session(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    sessions: SessionStore,
    workspace: Path,
) -> None:
    fake_openai.script([reply("slow", delay_s=0.6), reply("second")])
    loop = make_loop(agent_config(fake_openai.base_url))
    task = asyncio.create_task(loop.run_turn("first", KEY, meta(workspace)))
    while not fake_openai.requests:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    result = await asyncio.wait_for(loop.run_turn("again", KEY, meta(workspace)), 5)
    assert result.text == "second"
    assert [m.content for m in sessions.read_messages(KEY)] == ["first", "again", "second"]


async def test_reconfigure_switches_provider_and_environ_supplies_the_key(
    fake_openai: FakeOpenAI,
    fake_anthropic: FakeAnthropic,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    cfg = agent_config(fake_openai.base_url)
    cfg.bot.providers["openai"].api_key = None
    fake_openai.require_key = "sk-from-dotenv"
    loop = make_loop(cfg, environ={"OPENAI_API_KEY": "sk-from-dotenv"})
    fake_openai.script([reply("from openai")])
    assert (await loop.run_turn("one", KEY, meta(workspace))).text == "from openai"

    fake_anthropic.script([reply("from anthropic")])
    loop.reconfigure(agent_config(fake_anthropic.base_url, "anthropic"))
    assert (await loop.run_turn("two", KEY, meta(workspace))).text == "from anthropic"
    assert len(fake_openai.requests) == 1 and len(fake_anthropic.requests) == 1
