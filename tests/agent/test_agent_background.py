"""Heartbeat and cron turns: no-op replies leave no trace, tools are allowlisted, turns queue."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.bus import MessageBus
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message, SessionKey
from vikingbot.store.db import StateStore
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call
from vikingbot.tools.base import DeliveryStatus

KEY = SessionKey("slack", "T1", "C1")
HEARTBEAT = {"heartbeat": True, "unattended": True}


def seed(sessions: SessionStore, clock: FakeClock) -> bytes:
    """A session with one real exchange; returns the file's bytes."""
    sessions.get_or_create(KEY)
    sessions.append(
        KEY,
        Message("user", "hi bot", clock.now()),
        Message("assistant", "hi human", clock.now()),
    )
    return sessions.path_for(KEY).read_bytes()


async def test_heartbeat_noop_leaves_history_untouched(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    sessions: SessionStore,
    clock: FakeClock,
    workspace: Path,
) -> None:
    before = seed(sessions, clock)
    clock.advance(hours=1)
    fake_openai.script([tool_call("read_file", {"path": "SOUL.md"}), reply("**HEARTBEAT_OK**.")])
    loop = make_loop(agent_config(fake_openai.base_url))
    result = await loop.run_turn(
        "Read HEARTBEAT.md ...", KEY, {**HEARTBEAT, "workspace": str(workspace)}
    )
    assert result.text == "**HEARTBEAT_OK**."
    assert result.model_calls == 2
    assert sessions.path_for(KEY).read_bytes() == before


async def test_heartbeat_with_news_is_written_but_never_makes_the_session_fresh(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    sessions: SessionStore,
    clock: FakeClock,
    workspace: Path,
) -> None:
    seed(sessions, clock)
    last_user = sessions.get_meta(KEY).last_user_at  # type: ignore[union-attr]
    clock.advance(hours=5)
    fake_openai.script([reply("Your build failed on main.")])
    loop = make_loop(agent_config(fake_openai.base_url))
    await loop.run_turn(
        "check builds", KEY, {**HEARTBEAT, "workspace": str(workspace), "run_id": "r1"}
    )
    history = sessions.read_messages(KEY)
    assert [(m.role, m.content) for m in history[-2:]] == [
        ("user", "check builds"),
        ("assistant", "Your build failed on main."),
    ]
    assert history[-2].metadata == {"heartbeat": True, "run_id": "r1"}
    assert sessions.get_meta(KEY).last_user_at == last_user  # type: ignore[union-attr]


async def test_unattended_tools_follow_the_allowlist_and_are_audited(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
    store: StateStore,
) -> None:
    fake_openai.script(
        [
            tool_call("grep", {"pattern": "Ragnar"}),
            tool_call("exec", {"command": "touch pwned"}),
            reply("HEARTBEAT_OK"),
        ]
    )
    asked: list[str] = []

    async def ask(name: str, args: dict[str, Any]) -> bool:
        asked.append(name)
        return True

    cfg = agent_config(fake_openai.base_url)
    cfg.bot.tools.auto_approve = ["*"]
    loop = make_loop(cfg, store=store, approval_callback=ask)
    result = await loop.run_turn(
        "tick", KEY, {**HEARTBEAT, "workspace": str(workspace), "run_id": "r2"}
    )
    assert [(c.name, c.approved) for c in result.tool_calls] == [("grep", True), ("exec", False)]
    assert not (workspace / "pwned").exists()
    assert asked == []  # nobody is asked in an unattended turn
    assert result.wrote is False
    events = list(reversed(store.audit_events()))
    assert [(e["action"], e["subject"], e["actor"]) for e in events] == [
        ("tool.approve", "grep", "heartbeat"),
        ("tool.deny", "exec", "heartbeat"),
    ]
    assert events[1]["details"]["run_id"] == "r2"
    assert events[0]["details"]["turn_id"] == events[1]["details"]["turn_id"]


async def test_message_tool_in_a_background_turn(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    out: list[tuple[str, str | None]] = []

    async def deliver(text: str, target: str | None = None) -> DeliveryStatus:
        out.append((text, target))
        return "delivered"

    fake_openai.script(
        [
            tool_call("message", {"text": "Standup in 5 minutes. HEARTBEAT_KEEP"}),
            reply("HEARTBEAT_OK"),
        ]
    )
    loop = make_loop(agent_config(fake_openai.base_url), bus=MessageBus())
    result = await loop.run_turn(
        "tick",
        SessionKey("heartbeat", "default", "shared"),
        {**HEARTBEAT, "workspace": str(workspace), "run_id": "r3"},
        deliver=deliver,
    )
    # the turn's deliverer (the delivery service in production) gets it, tokens stripped
    assert out == [("Standup in 5 minutes.", None)]
    assert result.messages_sent == 1
    assert result.wrote is True


async def test_user_turn_and_background_turn_never_interleave(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    sessions: SessionStore,
    workspace: Path,
) -> None:
    # Each answer takes a while; without the session lock the two turns would overlap.
    fake_openai.responder = lambda req: reply(f"re: {req.last_user_text}", delay_s=0.3)
    loop = make_loop(agent_config(fake_openai.base_url))
    ws = {"workspace": str(workspace)}
    user = asyncio.create_task(loop.run_turn("user question", KEY, ws))
    await _until(lambda: len(fake_openai.requests) == 1)  # the user turn holds the session
    background = asyncio.create_task(loop.run_turn("cron job", KEY, {**ws, "unattended": True}))
    await asyncio.gather(user, background)

    assert [m.content for m in sessions.read_messages(KEY)] == [
        "user question",
        "re: user question",
        "cron job",
        "re: cron job",
    ]
    # The background turn's request was built after the user turn had finished.
    second = fake_openai.requests[1]
    assert second.last_user_text == "cron job"
    assert "re: user question" in second.text


async def _until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Yield to the event loop until ``condition`` holds (the fake records from its thread)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.001)
