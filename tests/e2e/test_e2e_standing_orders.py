"""A new user who has not chatted yet (issue 30), black-box.

`vikingbot gateway` on a home with no chat platform, no owner and no session at
all; the user puts a task into the shared HEARTBEAT.md as the README says. The
gateway's next cycle runs it and the result waits in the inbox.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll, with_tasks
from vikingbot.testing.fake_openai import reply

RESULT = "No rain in Berlin tomorrow."


def test_a_home_that_never_chatted_gets_its_first_result_in_the_inbox(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    home.write_config(
        owner=None,
        channels={"cli": {"enabled": True}, "telegram": {"enabled": False}},
        heartbeat={"timezone": "UTC", "interval_seconds": 10},
    )
    gateways(home)
    assert not list(home.sessions_dir.glob("*.jsonl"))  # nobody chatted
    home.llm.script([reply(RESULT)])
    home.write_heartbeat(with_tasks("- Tell me if it will rain in Berlin tomorrow."))

    items = poll(home.inbox, "the first heartbeat result in the inbox")
    assert [i.text for i in items] == [RESULT]
    runs = [r for r in home.ledger() if r["decision"] == "run"]
    assert [(r["workspace"], r["entry"], r["outcome"]) for r in runs] == [
        ("shared", None, "inboxed")
    ]
    assert len(home.llm.requests) == 1

    plan = home.cli("heartbeat", "plan", "--all", "--json")
    assert plan.returncode == 0, plan.stderr
    reasons = {d["reason"] for d in json.loads(plan.stdout)}
    assert "no-sessions" not in reasons
