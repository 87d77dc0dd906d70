"""Schedules keep their minute, and a save applies now (issue 42), on a real gateway at
the default interval (ten minutes): an `every: 1m` entry and a `daily:` entry run
within seconds of their due times, not at the next ten-minute cycle; a task added to
a saved HEARTBEAT.md runs within seconds, without `run-now`; `run-now --entry` runs
one scheduled entry now without moving its schedule.

Real time: the `daily:` entry is set at the next minute that is at least 12 s away,
so the test waits 12-72 s for it (it does the rest meanwhile).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll, with_tasks
from vikingbot.testing.fake_openai import reply

ON_TIME_S = 5.0  # "within a few seconds", with room for a loaded CI machine
TASK = "- Tell me how much disk space is free"


def seed(home: Home, states: list[Any]) -> None:
    from vikingbot.heartbeat.state import HeartbeatState
    from vikingbot.store.db import StateStore

    store = StateStore.open(home.database_url)
    try:
        HeartbeatState(store).save_entries(states)
    finally:
        store.close()


def runs(home: Home, entry: str | None, trigger: str = "scheduled") -> list[dict[str, Any]]:
    return [
        r
        for r in home.ledger()
        if r["decision"] == "run" and r["entry"] == entry and r["trigger"] == trigger
    ]


def late_s(row: dict[str, Any], due: datetime) -> float:
    at = datetime.fromisoformat(str(row["at"]))
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return (at - due).total_seconds()


def test_entries_run_at_their_minute_and_a_save_applies_now(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    from vikingbot.heartbeat.state import EntryState

    briefs = iter(range(1, 100))

    def answer(request: Any) -> Any:
        text = request.last_user_text or ""
        if "Brief" in text:  # news each time (the same text twice is a repeat, not sent)
            return reply(f"the morning brief #{next(briefs)}")
        for word, result in (("Minute", "minute tick"), ("disk space", "40 GB free")):
            if word in text:
                return reply(result)
        return None

    home.llm.responder = answer
    home.write_config(  # the default interval_seconds (600); results go to the inbox
        owner=None, channels={"cli": {"enabled": True}, "telegram": {"enabled": False}}
    )
    now = datetime.now(UTC)
    minute_due = now + timedelta(seconds=10)
    brief_at = (now + timedelta(seconds=72)).replace(second=0, microsecond=0)
    hhmm = f"{brief_at:%H:%M}"
    home.write_heartbeat(
        with_tasks(
            "- every: 1m title: Minute task: Say minute tick",
            f"- daily: {hhmm} title: Brief task: Write the morning brief",
        )
    )
    day = timedelta(days=1)
    seed(
        home,
        [  # seen yesterday; Minute last ran 50 s ago, Brief yesterday at its time
            EntryState("shared", "Minute", now - day, last_fired=minute_due - timedelta(minutes=1)),
            EntryState("shared", "Brief", now - day, last_fired=brief_at - day),
        ],
    )
    gateways(home)

    (minute,) = poll(lambda: runs(home, "Minute"), "the every: 1m entry's run", timeout=30)
    assert 0 <= late_s(minute, minute_due) < ON_TIME_S, (minute["at"], minute_due)

    # a saved file is looked at within seconds: the new task runs once, no run-now
    saved = time.monotonic()
    home.write_heartbeat(
        with_tasks(
            "- every: 1m title: Minute task: Say minute tick",
            f"- daily: {hhmm} title: Brief task: Write the morning brief",
            TASK,
        )
    )
    poll(
        lambda: [i for i in home.inbox() if "40 GB free" in i.text],
        "the new task's result in the inbox",
        timeout=30,
    )
    assert time.monotonic() - saved < 15
    (checklist,) = runs(home, None)
    assert checklist["outcome"] == "inboxed"

    # run-now --entry: a scheduled entry that is not due runs now; its schedule stays
    res = home.cli("heartbeat", "run-now", "--entry", "Brief", "--json")
    assert res.returncode == 0, res.stderr
    (row,) = json.loads(res.stdout)
    assert (row["name"], row["decision"], row["reason"]) == ("Brief", "run", "manual")
    assert row["next_due"] == brief_at.isoformat()
    plan = home.cli_json("heartbeat", "plan")
    due = {d["name"]: d["next_due"] for d in plan if d["reason"] == "not-due"}
    assert due["Brief"] == brief_at.isoformat()

    # the daily: entry at its minute, within seconds, with the interval at ten minutes
    (brief,) = poll(lambda: runs(home, "Brief"), "the daily: entry's run", timeout=90)
    assert 0 <= late_s(brief, brief_at) < ON_TIME_S, (brief["at"], brief_at)
    assert brief["outcome"] == "inboxed"
    texts = [i.text for i in home.inbox()]
    # run-now's, then the scheduled one
    assert [t for t in texts if "brief" in t] == ["the morning brief #1", "the morning brief #2"]
    assert texts.count("40 GB free") == 1  # the saved task ran once
