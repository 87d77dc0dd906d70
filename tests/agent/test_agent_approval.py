"""Approval policy: interactive lists and prompts, the unattended allowlist, the audit trail."""

from __future__ import annotations

from typing import Any

import pytest

from vikingbot.agent.approval import (
    Approver,
    acp_action,
    decide,
    decide_action,
    entry_matches,
    mcp_action,
    runs_unattended,
    tool_action,
)
from vikingbot.config.schema import Config
from vikingbot.store.db import StateStore


def config(**tools: Any) -> Config:
    heartbeat = tools.pop("safe_tools", None)
    bot: dict[str, Any] = {"tools": tools}
    if heartbeat is not None:
        bot["heartbeat"] = {"safe_tools": heartbeat}
    return Config.model_validate({"bot": bot})


@pytest.mark.parametrize(
    ("name", "read_only", "cfg", "expected"),
    [
        ("read_file", True, {}, "approve"),  # read-only runs without a prompt
        ("exec", False, {}, "ask"),
        ("exec", False, {"auto_approve": ["exec"]}, "approve"),
        ("exec", False, {"auto_approve": ["*"]}, "approve"),
        ("exec", False, {"auto_approve": ["*"], "auto_deny": ["exec"]}, "deny"),
        ("read_file", True, {"auto_deny": ["read_file"]}, "deny"),
        ("exec", False, {"auto_approve": ["exec_*", "ex"]}, "ask"),  # no other wildcards
        ("mcp__github__create_issue", False, {"auto_approve": ["mcp__github__*"]}, "approve"),
    ],
)
def test_interactive_policy(name: str, read_only: bool, cfg: dict[str, Any], expected: str) -> None:
    assert decide(config(**cfg), name, read_only=read_only, unattended=False).outcome == expected


@pytest.mark.parametrize(
    ("name", "read_only", "cfg", "expected"),
    [
        ("read_file", True, {}, "approve"),  # default safe_tools: read-only tools + message
        ("message", False, {}, "approve"),
        ("exec", False, {}, "deny"),
        ("web_fetch", False, {}, "deny"),
        ("exec", False, {"auto_approve": ["*"]}, "deny"),  # auto-approve ignored
        ("exec", False, {"auto_approve": ["exec"]}, "deny"),
        ("exec", False, {"safe_tools": ["exec"]}, "approve"),
        ("exec", False, {"safe_tools": ["exec"], "auto_deny": ["exec"]}, "deny"),
        ("grep", True, {"auto_deny": ["*"]}, "deny"),
        ("get_all_credentials", True, {}, "deny"),  # nothing guessed from the verb
        ("get_all_credentials", True, {"safe_tools": ["get_*", "get"]}, "deny"),
        ("my_tool", True, {"safe_tools": ["*"]}, "deny"),  # no * in safe_tools
        ("mcp__jira__search", True, {"safe_tools": ["mcp__jira__search"]}, "approve"),
        ("mcp__jira__delete", False, {"safe_tools": ["mcp__jira__search"]}, "deny"),
        ("mcp__jira__delete", False, {"safe_tools": ["mcp__jira__*"]}, "approve"),
        ("mcp__jira2__search", True, {"safe_tools": ["mcp__jira__*"]}, "deny"),
        ("mcp__jira__search", True, {"safe_tools": ["mcp__*"]}, "deny"),
        (
            "mcp__jira__x",
            False,
            {"safe_tools": ["mcp__jira__*"], "auto_deny": ["mcp__jira__x"]},
            "deny",
        ),
    ],
)
def test_unattended_policy(name: str, read_only: bool, cfg: dict[str, Any], expected: str) -> None:
    assert decide(config(**cfg), name, read_only=read_only, unattended=True).outcome == expected


def test_entry_matching_is_exact() -> None:
    assert entry_matches("read_file", "read_file", star=False)
    assert not entry_matches("read", "read_file", star=False)
    assert not entry_matches("*", "read_file", star=False)
    assert entry_matches("*", "read_file", star=True)
    assert not entry_matches("mcp__gh__*", "mcp__gh__", star=True)
    assert not entry_matches("mcp____*", "mcp____x", star=True)


def _events(store: StateStore) -> list[dict[str, Any]]:
    return list(reversed(store.audit_events(limit=50)))


async def test_every_decision_is_audited(store: StateStore) -> None:
    answers = iter([True, False])
    asked: list[tuple[str, dict[str, Any]]] = []

    async def ask(name: str, args: dict[str, Any]) -> bool:
        asked.append((name, args))
        return next(answers)

    approver = Approver(config(auto_deny=["web_fetch"]), store=store, callback=ask)
    meta: dict[str, Any] = {}
    common = {"session": "cli:default:local", "metadata": meta, "turn_id": "t1"}
    r1 = await approver.check(tool_action("read_file", read_only=True), {"path": "a"}, **common)
    r2 = await approver.check(tool_action("exec", read_only=False), {"command": "ls"}, **common)
    r3 = await approver.check(tool_action("exec", read_only=False), {"command": "rm x"}, **common)
    r4 = await approver.check(tool_action("web_fetch", read_only=False), {"url": "u"}, **common)
    assert [r.approved for r in (r1, r2, r3, r4)] == [True, True, False, False]
    assert asked == [("exec", {"command": "ls"}), ("exec", {"command": "rm x"})]

    events = _events(store)
    assert [(e["action"], e["subject"], e["outcome"], e["actor"]) for e in events] == [
        ("tool.approve", "read_file", "approved", "user"),
        ("tool.approve", "exec", "approved", "user"),
        ("tool.deny", "exec", "denied", "user"),
        ("tool.deny", "web_fetch", "denied", "user"),
    ]
    assert events[2]["reason"] == "exec was declined by the user"
    assert "auto_deny" in events[3]["reason"]
    assert events[1]["details"]["session"] == "cli:default:local"
    assert events[1]["details"]["turn_id"] == "t1"
    assert events[1]["details"]["arguments"] == '{"command": "ls"}'


async def test_unattended_decisions_are_audited_with_run_and_entry(store: StateStore) -> None:
    approver = Approver(config(auto_approve=["*"]), store=store, callback=None)
    meta = {"heartbeat": True, "unattended": True, "run_id": "r9", "entry": "Merge requests"}
    for name, ro in [("grep", True), ("exec", False), ("get_all_credentials", True)]:
        await approver.check(
            tool_action(name, read_only=ro),
            {},
            session="heartbeat:default:shared",
            metadata=meta,
            turn_id="t2",
        )
    events = _events(store)
    assert [(e["subject"], e["outcome"]) for e in events] == [
        ("grep", "approved"),
        ("exec", "denied"),
        ("get_all_credentials", "denied"),
    ]
    assert all(e["actor"] == "heartbeat" for e in events)
    assert events[1]["reason"].startswith("exec is not in bot.heartbeat.safe_tools")
    assert events[0]["details"]["matched"] == "grep"
    assert events[1]["details"]["run_id"] == "r9"
    assert events[1]["details"]["entry"] == "Merge requests"
    assert events[1]["details"]["unattended"] is True


async def test_no_callback_denies_writes_and_says_how_to_allow(store: StateStore) -> None:
    approver = Approver(config(), store=store, callback=None)
    d = await approver.check(
        tool_action("write_file", read_only=False),
        {},
        session="slack:T:C",
        metadata={},
        turn_id="t",
    )
    assert not d.approved
    assert "bot.tools.auto_approve" in d.reason
    assert _events(store)[0]["action"] == "tool.deny"


@pytest.mark.parametrize(
    ("kind", "title", "unattended", "cfg", "expected"),
    [
        ("read", "read_file", True, {}, "approve"),
        ("delete", "read_file", True, {}, "deny"),  # issue 38: the title never widens
        ("execute", "message", True, {}, "deny"),
        ("execute", "list_dir", True, {}, "deny"),
        ("execute", "ls", True, {"safe_tools": ["exec"]}, "approve"),
        ("move", "mv a b", True, {"safe_tools": ["exec"]}, "approve"),  # move counts as exec
        ("edit", "Edit a.txt", True, {"safe_tools": ["edit_file"]}, "approve"),
        ("edit", "Edit a.txt", True, {"safe_tools": ["Edit a.txt"]}, "deny"),
        ("read", "exec", True, {}, "deny"),  # a title naming a stricter tool narrows
        ("read", "exec", False, {}, "ask"),
        ("read", "Look at a", False, {}, "approve"),  # read-only kind, someone present
        ("read", "secrets", False, {"auto_deny": ["secrets"]}, "deny"),  # auto_deny on title
        ("other", "x", True, {"safe_tools": ["read_file", "exec"]}, "deny"),  # maps to nothing
        ("switch_mode", "x", False, {}, "ask"),
        ("made_up", "read_file", True, {}, "deny"),
        (None, None, True, {}, "deny"),
        ("fetch", "weather", False, {"auto_deny": ["web_fetch"]}, "deny"),
    ],
)
def test_acp_kind_decides(
    kind: str | None, title: str | None, unattended: bool, cfg: dict[str, Any], expected: str
) -> None:
    verdict = decide_action(config(**cfg), acp_action(kind, title), unattended=unattended)
    assert verdict.outcome == expected
    assert str(kind or "other") in verdict.reason


def test_mcp_tools_go_by_configured_server_and_tool() -> None:
    cfg = config(safe_tools=["mcp__github__list_issues"], auto_deny=["mcp__jira__*"])
    action = mcp_action("github", "list_issues")
    assert decide_action(cfg, action, unattended=True).approved
    assert not decide_action(cfg, mcp_action("github", "delete_repo"), unattended=True).approved
    assert (
        decide_action(cfg, mcp_action("jira", "search", read_only=True), unattended=False).outcome
        == "deny"
    )
    assert runs_unattended(cfg, "mcp__github__list_issues")
    assert not runs_unattended(cfg, "exec")
    assert runs_unattended(config(), "read_file") and runs_unattended(config(), "message")
