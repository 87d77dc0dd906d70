"""A per-task result delivered just before a SIGKILL is not delivered again after it.

The gateway is killed after the owner got a task's result and before the task was
moved to Completed (the test holds HEARTBEAT.md's lock, so the move waits). The
run was recorded before the move (ledger row and entry state, the entry still
marked running): the restarted gateway makes the owed move and does not run the
task again, and the owner does not get the result a second time. (A run cut off
before it was recorded runs again under the same identity: its sends keep their
dedupe keys, tests/heartbeat.)

The restart comes an interval after the first cycle, as after a while down: the
restarted gateway's first cycle is due at once. The test records the first cycle
an interval earlier instead of waiting the interval (10 s) out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

from filelock import FileLock

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll, with_tasks
from vikingbot.fsutil import lock_path
from vikingbot.testing.fake_llm import RecordedRequest, Step, reply

TASK = "Water the plants"
INTERVAL_S = 10
RESULT = f"Finished: {TASK}"


def test_a_result_delivered_before_a_kill_is_not_delivered_again(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    def answer(request: RecordedRequest) -> Step | None:
        return reply(RESULT) if TASK in (request.last_user_text or "") else None

    home.llm.responder = answer
    home.write_config(
        # a crashed run counts as stale after the turn timeout plus a minute
        heartbeat={
            "timezone": "UTC",
            "mode": "per-task",
            "task_timeout_s": 2,
            "interval_seconds": INTERVAL_S,
        }
    )
    home.add_user_session()
    path = home.write_heartbeat(with_tasks(f"- {TASK}"))

    held = FileLock(str(lock_path(path)))
    held.acquire()  # the completion move waits for this lock
    try:
        first = gateways(home)
        home.telegram.wait_for_sent(1, timeout=60)
        poll(lambda: [r for r in home.outbox() if r.status == "sent"], "the result marked sent")
        # the unit's commit (ledger row, entry state, its claim ended) comes after the
        # send: killed before it, the restart would wait out the dead claim's lease
        # and settle on the outbox row instead (another path, tested in tests/heartbeat)
        poll(lambda: [r for r in home.ledger() if r["decision"] == "run"], "the run recorded")
        first.kill()
    finally:
        held.release()
    assert [m["text"] for m in home.telegram.sent] == [RESULT]
    assert re.search(rf"^- {TASK}$", _active(path), re.M)  # not completed: the kill came first

    _first_cycle_earlier(home, timedelta(seconds=INTERVAL_S))
    second = gateways(home)
    poll(lambda: TASK not in _active(path), "the task completed after the restart", 150)
    assert second.stop() == 0
    asked = [r for r in home.llm.requests if TASK in (r.last_user_text or "")]
    assert len(asked) == 1  # recorded before the kill: the move was owed, not the run
    assert [m["text"] for m in home.telegram.sent] == [RESULT]  # not sent twice


def _first_cycle_earlier(home: Home, by: timedelta) -> None:
    """Move the recorded start of the last heartbeat cycle back by ``by``."""
    from vikingbot.heartbeat.service import GLOBAL
    from vikingbot.heartbeat.state import HeartbeatState
    from vikingbot.store.db import StateStore

    store = StateStore.open(home.database_url)
    try:
        state = HeartbeatState(store)
        last = state.workspace(GLOBAL).last_cycle_at
        assert last is not None, "the first gateway ran no cycle"
        state.mark_cycle(GLOBAL, last - by)
    finally:
        store.close()


def _active(path: object) -> str:
    from pathlib import Path

    return Path(str(path)).read_text(encoding="utf-8").split("## Completed", 1)[0]
