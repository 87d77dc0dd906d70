"""The README's terminal-only user (issue 9, item 7), black-box.

`vikingbot gateway`, `vikingbot chat`, tasks in the shared HEARTBEAT.md, and no
chat platform nor owner configured: the tasks run on the gateway's next cycle
and the result waits in the inbox (`vikingbot inbox --json`).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll, with_tasks
from vikingbot.testing.fake_openai import reply

RESULT = "Free disk space: 40 GB on /."


def test_tasks_of_a_terminal_only_user_run_and_land_in_the_inbox(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    home.write_config(
        owner=None,
        channels={"cli": {"enabled": True}, "telegram": {"enabled": False}},
        heartbeat={"timezone": "UTC", "interval_seconds": 10},
    )
    # its first scheduled cycle comes once the chat below is done, not at the start
    # (a whole 10 s interval before the tasks are seen)
    home.next_cycle_in(4, interval_s=10)
    gateways(home)
    home.llm.script(["Hello, I am here."])
    chat = home.cli("chat", "-m", "hi", "--json")
    assert chat.returncode == 0, chat.stderr
    assert json.loads(chat.stdout)["via"] == "gateway"

    home.llm.script([reply(RESULT)])
    home.write_heartbeat(with_tasks("- Tell me how much disk space is free"))

    (run,) = poll(
        lambda: [r for r in home.ledger() if r["workspace"] == "shared" and r["decision"] == "run"],
        "the shared workspace's checklist turn on a scheduled cycle",
    )
    assert run["trigger"] == "scheduled"
    assert run["outcome"] == "inboxed", run
    assert len(home.llm.requests) == 2  # the chat, then the heartbeat: nothing else

    res = home.cli("inbox", "--json")
    assert res.returncode == 0, res.stderr
    items = json.loads(res.stdout)
    assert [(i["text"], i["via"]) for i in items] == [(RESULT, "gateway")]
    assert home.telegram.sent == []
