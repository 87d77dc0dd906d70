"""Every refusal is audited, whatever made it; with nobody present an unauditable call is denied."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy import text

from vikingbot.agent.approval import Approver, tool_action
from vikingbot.agent.loop import BuiltinLoop
from vikingbot.config.schema import Config
from vikingbot.session.types import SessionKey
from vikingbot.store.db import StateStore
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

KEY = SessionKey("slack", "T1", "C1")
UNATTENDED = {"heartbeat": True, "unattended": True, "run_id": "r1"}

NEAR_MISSES = [
    "exec ",  # trailing space
    "Exec",  # other case
    "\u0435x\u0435c",  # Cyrillic е twice
    "ex\u200bec",  # zero-width space inside
    "exec\u200d",  # zero-width joiner after
    "no_such_tool",
    "x" * 5000,  # a huge name is audited, shortened
]


async def test_near_miss_and_unknown_names_are_refused_and_audited(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
    store: StateStore,
) -> None:
    fake_openai.script(
        [*(tool_call(n, {"command": "rm -rf ~"}) for n in NEAR_MISSES), reply("HEARTBEAT_OK")]
    )
    loop = make_loop(agent_config(fake_openai.base_url), store=store)
    result = await loop.run_turn("tick", KEY, {**UNATTENDED, "workspace": str(workspace)})
    assert [c.approved for c in result.tool_calls] == [False] * len(NEAR_MISSES)
    events = list(reversed(store.audit_events(limit=50)))
    assert [(e["action"], e["actor"]) for e in events] == [("tool.deny", "heartbeat")] * len(
        NEAR_MISSES
    )
    subjects = [e["subject"] for e in events]
    assert subjects[0] == "exec " and subjects[1] == "Exec"
    assert subjects[2] == "'\\u0435x\\u0435c'"  # a look-alike is shown escaped, never as "exec"
    assert subjects[3] == "'ex\\u200bec'"
    assert len(subjects[6]) <= 100
    assert all("there is no tool" in e["reason"] for e in events)
    assert all(e["details"]["run_id"] == "r1" for e in events)


async def test_unparseable_and_wrong_arguments_are_refused_and_audited(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
    store: StateStore,
) -> None:
    fake_openai.script(
        [
            tool_call("read_file", '{"path": "SOUL.md"'),  # broken JSON
            tool_call("read_file", {"nopath": 1}),  # does not fit the tool
            reply("done"),
        ]
    )
    loop = make_loop(agent_config(fake_openai.base_url), store=store)
    result = await loop.run_turn("tick", KEY, {**UNATTENDED, "workspace": str(workspace)})
    assert [(c.name, c.approved, c.error) for c in result.tool_calls] == [
        ("read_file", False, True),
        ("read_file", False, True),
    ]
    events = list(reversed(store.audit_events(limit=50)))
    assert [(e["action"], e["subject"]) for e in events] == [("tool.deny", "read_file")] * 2
    assert "not valid JSON" in events[0]["reason"]


async def test_interactive_unknown_tool_is_audited_too(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
    store: StateStore,
) -> None:
    fake_openai.script([tool_call("Exec", {"command": "ls"}), reply("ok")])
    loop = make_loop(agent_config(fake_openai.base_url), store=store)
    await loop.run_turn("hi", KEY, {"workspace": str(workspace)})
    (event,) = store.audit_events()
    assert (event["action"], event["subject"], event["actor"]) == ("tool.deny", "Exec", "user")


async def test_unattended_read_is_denied_when_the_audit_cannot_be_written(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    workspace: Path,
    store: StateStore,
) -> None:
    with store.engine.begin() as conn:  # a real fault: the audit table is gone
        conn.execute(text("DROP TABLE audit_events"))
    fake_openai.script([tool_call("read_file", {"path": "SOUL.md"}), reply("HEARTBEAT_OK")])
    loop = make_loop(agent_config(fake_openai.base_url), store=store)
    result = await loop.run_turn("tick", KEY, {**UNATTENDED, "workspace": str(workspace)})
    (call,) = result.tool_calls
    assert not call.approved
    assert "could not be audited" in call.result and "Ragnar" not in call.result


async def test_interactive_approval_stands_when_the_audit_fails(store: StateStore) -> None:
    """Someone is present and sees the answer; only the audit row is missing (and logged)."""
    with store.engine.begin() as conn:
        conn.execute(text("DROP TABLE audit_events"))
    cfg = Config.model_validate({"bot": {"tools": {"autoApprove": ["read_file"]}}})
    approver = Approver(cfg, store=store)
    verdict = await approver.check(
        tool_action("read_file", read_only=True), {}, session="s", metadata={}, turn_id="t"
    )
    assert verdict.approved
