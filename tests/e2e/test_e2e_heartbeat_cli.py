"""`vikingbot heartbeat plan --json` and `run-now --json` as a user runs them (no gateway)."""

from __future__ import annotations

from tests.support.home import OWNER_KEY, Home, with_tasks
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_openai import tool_call
from vikingbot.workspace.manager import WorkspaceManager

OTHER_KEY = SessionKey("telegram", "default", "777")
PLAN_FIELDS = {"workspace", "session", "entry", "decision", "reason"}
RUN_FIELDS = {"workspace", "decision", "reason", "outcome", "model_calls"}


def prepare(home: Home) -> tuple[str, str]:
    """Two chats, each with its own workspace: one with a task, one with the template."""
    home.write_config(sandbox={"mode": "per-session"})
    manager = WorkspaceManager(home.data / "workspace", "per-session")
    busy, idle = manager.workspace_for(OWNER_KEY), manager.workspace_for(OTHER_KEY)
    home.add_user_session(OWNER_KEY)
    home.add_user_session(OTHER_KEY)
    home.write_heartbeat(with_tasks("- Check whether the VPS disk is over 90%"), busy.name)
    return busy.name, idle.name


def test_plan_and_run_now_report_each_workspace_and_count_model_calls(home: Home) -> None:
    busy, idle = prepare(home)

    plan = home.cli_json("heartbeat", "plan")
    assert all(set(row) >= PLAN_FIELDS for row in plan), plan
    assert sorted(
        (r["workspace"], r["session"], r["entry"], r["decision"], r["reason"]) for r in plan
    ) == sorted([(busy, None, None, "run", "due"), (idle, None, None, "skip", "empty")])
    assert home.llm.requests == []  # planning never asks the model

    home.llm.script([tool_call("message", {"text": "Disk at 93% on the VPS."}), "HEARTBEAT_OK"])
    results = home.cli_json("heartbeat", "run-now")
    assert all(set(row) >= RUN_FIELDS for row in results), results
    by_ws = {r["workspace"]: r for r in results}
    assert set(by_ws) == {busy, idle}
    ran, skipped = by_ws[busy], by_ws[idle]
    assert (ran["decision"], ran["reason"]) == ("run", "manual")
    assert ran["outcome"] not in (None, "error", "timeout"), ran
    assert (skipped["decision"], skipped["reason"], skipped["outcome"]) == ("skip", "empty", None)
    assert skipped["model_calls"] == 0
    assert ran["model_calls"] == len(home.llm.requests) == 2
    assert "Read HEARTBEAT.md" in home.llm.requests[0].last_user_text
    # no gateway, so no Telegram: the result is kept in the inbox, never lost
    assert [i.text for i in home.inbox()] == ["Disk at 93% on the VPS."]


def test_two_run_nows_without_a_gateway_meet_as_busy(home: Home) -> None:
    """Issue 31: two `run-now`s typed at once with no gateway ran the same checklist twice
    (a claim key each); the second now finds the first's claim and says busy."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.home import poll
    from vikingbot.testing.fake_openai import reply

    busy_ws, _ = prepare(home)
    home.llm.script([reply("HEARTBEAT_OK", delay_s=30)])  # the first holds its claim...
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(home.cli_json, "heartbeat", "run-now")
        poll(lambda: home.llm.requests or None, "the first run-now's model call")
        second = home.cli_json("heartbeat", "run-now", "-w", busy_ws)
        home.llm.release()  # ...until the second has answered
        ran = first.result(timeout=60)
    assert [(r["decision"], r["reason"]) for r in second] == [("skip", "busy")]
    assert "held by" in (second[0]["detail"] or "")
    assert [r["reason"] for r in ran if r["workspace"] == busy_ws] == ["manual"]
    assert len(home.llm.requests) == 1
