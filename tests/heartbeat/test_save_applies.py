"""A save applies now, once (issue 42): a new unscheduled entry makes the checklist run
before its interval is up; an entry the turn itself rewrote does not (no loop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.harness import build_harness, with_tasks
from vikingbot.testing.fake_openai import FakeOpenAI, reply


def checklist(h: Any) -> tuple[str, str]:
    decisions, _ = h.hb.plan("scheduled", workspace="shared")
    (d,) = [d for d in decisions if d.entry is None and d.session is None]
    return d.decision, d.reason


async def test_a_new_entry_runs_at_once_and_the_turns_own_edit_does_not(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        path = h.write(with_tasks("- Water the plants"))
        fake.default = reply("HEARTBEAT_OK")
        await h.cycle()
        assert checklist(h) == ("skip", "not-due")  # ran; the interval paces it now

        path.write_text(with_tasks("- Water the plants", "- Feed the cat"), encoding="utf-8")
        assert checklist(h) == ("run", "due")  # a new entry: at once, not in ten minutes

        def rewrite(request: Any, path: Path = path) -> Any:  # the agent rewords its list
            path.write_text(with_tasks("- Water the plants (done Mon)", "- Feed the cat"))
            return reply("HEARTBEAT_OK")

        fake.responder = rewrite
        await h.cycle()
        assert fake.requests and "Feed the cat" in fake.requests[-1].last_user_text
        assert checklist(h) == ("skip", "not-due")  # its own edit starts no new turn
