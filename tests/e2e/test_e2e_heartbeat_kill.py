"""A per-task result delivered just before a SIGKILL is not delivered again after it.

The gateway is killed after the owner got a task's result and before the task was
moved to Completed (the test holds HEARTBEAT.md's lock, so the move waits). The
run was recorded before the move (ledger row and entry state, the entry still
marked running): the restarted gateway makes the owed move and does not run the
task again, and the owner does not get the result a second time. (A run cut off
before it was recorded runs again under the same identity: its sends keep their
dedupe keys, tests/heartbeat.)
"""

from __future__ import annotations

import re
from collections.abc import Callable

from filelock import FileLock

from vikingbot.fsutil import lock_path
from vikingbot.testing.fake_llm import RecordedRequest, Step, reply
from vikingbot.testing.gateway_proc import GatewayProcess
from vikingbot.testing.home import Home, poll, with_tasks

TASK = "Water the plants"
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
            "interval_seconds": 10,
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
        first.kill()
    finally:
        held.release()
    assert [m["text"] for m in home.telegram.sent] == [RESULT]
    assert re.search(rf"^- {TASK}$", _active(path), re.M)  # not completed: the kill came first

    second = gateways(home)
    poll(lambda: TASK not in _active(path), "the task completed after the restart", 150)
    assert second.stop() == 0
    asked = [r for r in home.llm.requests if TASK in (r.last_user_text or "")]
    assert len(asked) == 1  # recorded before the kill: the move was owed, not the run
    assert [m["text"] for m in home.telegram.sent] == [RESULT]  # not sent twice


def _active(path: object) -> str:
    from pathlib import Path

    return Path(str(path)).read_text(encoding="utf-8").split("## Completed", 1)[0]
