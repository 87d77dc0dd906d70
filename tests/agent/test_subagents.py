"""Sub-agents (the spawn tool) on the built-in loop with the scripted model: three started
in parallel from one chat turn (one finishes, one runs out of time, one is cancelled the
way a stop command cancels them), and a heartbeat entry whose turn spawns one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agent.conftest import LoopFactory
from tests.support.harness import Harness, build_harness, with_tasks
from vikingbot.config.schema import Config
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_llm import RecordedRequest, Step
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call, tool_calls

PARENT = SessionKey("telegram", "bot", "42")


class Recorder:
    """A turn's deliverer that keeps what it was handed, and can be waited on."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.changed = asyncio.Event()

    async def __call__(self, text: str, target: str | None = None) -> Any:
        self.texts.append(text)
        self.changed.set()
        return "delivered"

    async def wait_for(self, n: int, timeout: float = 30.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.texts) < n:
                self.changed.clear()
                await self.changed.wait()


def is_child(req: RecordedRequest) -> bool:
    return "You are a sub-agent" in req.text


def script(fake: FakeOpenAI, spawn: Step, children: Callable[[str], Step]) -> None:
    """The parent spawns, then replies; each child answers by its task."""

    def respond(req: RecordedRequest) -> Step:
        if is_child(req):
            return children(req.last_user_text)
        if any(m.get("role") == "tool" for m in req.messages):
            return reply("I started them; results will follow.")
        return spawn

    fake.responder = respond


async def test_three_in_parallel_one_times_out_one_cancelled(
    fake_openai: FakeOpenAI,
    make_loop: LoopFactory,
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    config = agent_config(fake_openai.base_url, subagentTimeoutS=1.5)
    loop = make_loop(config)
    spawn = tool_calls(
        ("spawn", {"task": "TASK-A: look up the release", "label": "release"}),
        ("spawn", {"task": "TASK-B: something slow", "tools": ["read_file"]}),
        ("spawn", {"task": "TASK-C: something the user stops"}),
    )

    def child(task: str) -> Step:
        if "TASK-A" in task:
            return reply("Python 3.14 is out.", delay_s=0.3)
        return reply("never seen", delay_s=60)

    script(fake_openai, spawn, child)
    deliver = Recorder()
    result = await loop.run_turn(
        "do three things", PARENT, {"workspace": str(workspace)}, deliver=deliver
    )
    # the parent got three ids at once and finished its turn while they run
    assert result.text == "I started them; results will follow."
    ids = [c.result.split()[1] for c in result.tool_calls]
    assert ids == [f"subagent:{PARENT}:{n}" for n in (1, 2, 3)]
    assert set(ids[1:]) <= {c["id"] for c in loop.subagents()}  # status lists them

    await deliver.wait_for(1)  # A's result
    assert deliver.texts[0].startswith("Sub-agent 1 (release) finished")
    assert "Python 3.14 is out." in deliver.texts[0]
    # C is stopped (as a stop command or the dashboard would do it); B runs out of time
    assert loop.cancel_subagents(PARENT, only=ids[2]) == 1
    assert [c["id"] for c in loop.subagents()] == [ids[1]]
    await deliver.wait_for(2)
    assert deliver.texts[1].startswith("Sub-agent 2 (TASK-B: something slow) ran out of time")
    assert loop.subagents() == []
    await asyncio.sleep(0.05)
    assert len(deliver.texts) == 2  # each result once; a cancelled one says nothing
    # each child ran in its own session with the tools it was given, never spawn
    kids = [r for r in fake_openai.requests if is_child(r)]
    tools = {
        ("TASK-A" in r.last_user_text, "TASK-B" in r.last_user_text): r.tool_names for r in kids
    }
    assert tools[(False, True)] == ["read_file"]
    assert "spawn" not in tools[(True, False)] and "read_file" in tools[(True, False)]
    assert (
        loop.sessions.read_messages(SessionKey.parse(ids[0]))[-1].content == "Python 3.14 is out."
    )


async def test_cancelling_the_parent_turn_cancels_its_sub_agents(
    fake_openai: FakeOpenAI,
    make_loop: LoopFactory,
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    """Ctrl-C in `vikingbot chat` and a control-API client that hangs up cancel the turn."""
    loop = make_loop(agent_config(fake_openai.base_url))
    spawn = tool_call("spawn", {"task": "TASK-SLOW: wait"})
    asked = asyncio.Event()
    main = asyncio.get_running_loop()

    def respond(req: RecordedRequest) -> Step:
        if is_child(req):
            main.call_soon_threadsafe(asked.set)
            return reply("late", delay_s=60)
        if any(m.get("role") == "tool" for m in req.messages):
            return reply("done", delay_s=60)  # the parent is still working when cancelled
        return spawn

    fake_openai.responder = respond
    turn = asyncio.create_task(
        loop.run_turn("go", PARENT, {"workspace": str(workspace)}, deliver=Recorder())
    )
    async with asyncio.timeout(30):
        await asyncio.wait_for(asked.wait(), 30)
    assert len(loop.subagents()) == 1
    turn.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        async with asyncio.timeout(30):
            await turn
    assert loop.subagents() == []


async def test_at_most_max_subagents_and_never_wider_tools(
    fake_openai: FakeOpenAI,
    make_loop: LoopFactory,
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    loop = make_loop(agent_config(fake_openai.base_url, maxSubagents=1))
    spawn = tool_calls(
        ("spawn", {"task": "TASK-1"}),
        ("spawn", {"task": "TASK-2"}),
        ("spawn", {"task": "TASK-3", "tools": ["no_such_power"]}),
    )
    script(fake_openai, spawn, lambda task: reply("ok", delay_s=60))
    result = await loop.run_turn("go", PARENT, {"workspace": str(workspace)}, deliver=Recorder())
    first, second, third = (c.result for c in result.tool_calls)
    assert first.startswith("sub-agent subagent:")
    assert "1 sub-agents are already running" in second
    assert "may only use tools this turn has; not: no_such_power" in third
    assert loop.cancel_subagents(PARENT) == 1


async def test_a_heartbeat_entry_spawns_one_with_unattended_tools_in_the_same_run(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async for h in build_harness(tmp_path, fake_openai):
        await heartbeat_spawn(h)


async def heartbeat_spawn(h: Harness) -> None:
    h.user_session()
    h.write(with_tasks("- Find out what changed in the release notes"))
    offered: list[list[str]] = []

    def child(task: str) -> Step:
        return reply("Three fixes, one new option.", delay_s=0.2)

    def respond(req: RecordedRequest) -> Step:
        if is_child(req):
            offered.append(req.tool_names)
            return child(req.last_user_text)
        if any(m.get("role") == "tool" for m in req.messages):
            return reply("HEARTBEAT_OK")
        return tool_call("spawn", {"task": "Read the release notes", "label": "notes"})

    h.fake.responder = respond
    report = await h.cycle()
    (row,) = [r for r in report.rows if r.decision == "run"]
    # the child's result was delivered within the run, before its outcome was settled
    assert [m.text for m in h.sent] == [
        "Sub-agent 1 (notes) finished (1 model calls):\n\nThree fixes, one new option."
    ]
    assert row.outcome == "delivered"
    assert row.model_calls == 3  # the parent's two calls and the child's one
    # sent by the run's own deliverer (keyed by the run, its first send)
    assert (h.sent[0].dedupe_key or "").startswith("hb-")
    assert (h.sent[0].dedupe_key or "").endswith(":1")
    # nobody watches a heartbeat: the child was offered only bot.heartbeat.safe_tools
    (tools,) = offered
    safe = set(h.rt.config.bot.heartbeat.safe_tools)
    assert set(tools) <= safe and "spawn" not in tools and "read_file" in tools
    assert not {"exec", "write_file", "web_fetch"} & set(tools)


def test_status_lists_the_running_sub_agents(capsys: pytest.CaptureFixture[str]) -> None:
    """`vikingbot status` prints what the gateway's /health says is running."""
    from vikingbot.cli.top_cmd import _show_status

    running = {
        "id": "subagent:telegram:bot:42:1",
        "parent": "telegram:bot:42",
        "label": "release notes",
        "started": "2026-12-06T20:00:00+00:00",
        "state": "running",
        "unattended": False,
    }
    agent = {"loop": "builtin", "ready": True, "problem": None, "detail": "openai / m"}
    data = {
        "config": "c",
        "data_dir": "d",
        "database": "db",
        "heartbeat": {"enabled": True, "interval_seconds": 600, "mode": "checklist"},
        "sessions": 1,
        "workspaces": 1,
        "sandbox_mode": "shared",
        "agent": {**agent, "where": "in the running gateway", "subagents": [running]},
    }
    _show_status(data, as_json=False)
    assert (
        "sub-agent:  subagent:telegram:bot:42:1 running since 2026-12-06T20:00:00+00:00: "
        "release notes"
    ) in capsys.readouterr().out


async def test_a_sub_agent_does_not_write_into_the_parents_live_text(
    fake_openai: FakeOpenAI,
    make_loop: LoopFactory,
    agent_config: Callable[..., Config],
    workspace: Path,
) -> None:
    from vikingbot.agent.streaming import TURN_STREAM
    from vikingbot.openai_api.live import Transcript

    loop = make_loop(agent_config(fake_openai.base_url))
    spawn = tool_call("spawn", {"task": "TASK-A: find it"})
    script(fake_openai, spawn, lambda task: reply("CHILD WORDS", delay_s=0.2))
    live = Transcript()  # an API answer (a chat's live preview is the same kind of sink)
    deliver = Recorder()
    token = TURN_STREAM.set(live)
    try:
        result = await loop.run_turn(
            "find it", PARENT, {"workspace": str(workspace)}, deliver=deliver
        )
    finally:
        TURN_STREAM.reset(token)
    await deliver.wait_for(1)  # the child has answered (its model streamed)
    assert "CHILD WORDS" in deliver.texts[0]
    assert live.tools == ["spawn"] and live.text() == result.text  # the parent's words only
