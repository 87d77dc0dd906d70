"""The memory tools in a turn: chats remember through the versioned path; unattended turns recall."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.config.schema import Config
from vikingbot.memory import versions
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

KEY = SessionKey("cli", "default", "mem")


async def yes(name: str, args: dict[str, Any]) -> bool:
    return True


async def test_a_chat_remembers_and_an_unattended_turn_only_recalls(
    agent_config: Callable[..., Config],
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    workspace: Path,
) -> None:
    loop = make_loop(agent_config(fake_openai.base_url), approval_callback=yes)
    meta = {"workspace": str(workspace)}
    fake_openai.script(
        [
            tool_call(
                "memory", {"action": "remember", "text": "Locker code MARK-3", "file": "USER.md"}
            ),
            reply("Remembered."),
        ]
    )
    result = await loop.run_turn("remember my locker code MARK-3", KEY, meta)
    assert result.text == "Remembered." and result.wrote
    assert (workspace / "memory" / "USER.md").read_text() == "- Locker code MARK-3\n"
    [v] = versions.log(workspace)
    assert v.reason == f"remember ({KEY})"

    fake_openai.script(
        [
            tool_call("memory", {"action": "forget", "text": "MARK-3", "file": "USER.md"}),
            tool_call("recall", {"query": "locker"}),
            reply("done"),
        ]
    )
    hb = {**meta, "heartbeat": True}
    result = await loop.run_turn("tidy memory", SessionKey("heartbeat", "default", "x"), hb)
    offered = set(fake_openai.requests[-3].tool_names)
    assert "recall" in offered and "memory" not in offered
    forget, recall = result.tool_calls
    assert not forget.approved and "safe_tools" in forget.result
    assert recall.approved and "MARK-3" in recall.result
    assert (workspace / "memory" / "USER.md").read_text() == "- Locker code MARK-3\n"
    # the next chat request carries the memory in its system prompt, counted as memory
    fake_openai.script([reply("ok")])
    result = await loop.run_turn("hi", KEY, meta)
    assert "MARK-3" in fake_openai.requests[-1].system
    assert result.request_chars["memory"] > len("- Locker code MARK-3")
