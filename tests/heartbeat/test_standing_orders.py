"""Standing orders (issue 30): what the user wrote runs whether or not anyone chatted.

One process, the real agent loop and SDK against the fake model server; time moves
through the harness's clock, so "a quiet weekend" is three days on the clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.harness import Harness, build_harness, make_config, with_tasks
from vikingbot.clock import FakeClock
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI, reply

FRIDAY = datetime(2026, 3, 6, 12, 0, tzinfo=UTC)
MONDAY = datetime(2026, 3, 9, 9, 0, tzinfo=UTC)  # after 08:30, three days later
TASKS = with_tasks(
    "- Tell me if it will rain in Berlin tomorrow.",
    "- daily: 08:30 title: Morning brief task: Give me today's calendar.",
    "- every: 2h title: Builds task: Check the nightly build.",
)
CHAT = SessionKey("telegram", "default", "42")


@pytest.fixture
async def weekend(tmp_path: Path, fake: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in build_harness(tmp_path, fake, clock=FakeClock(FRIDAY)):
        yield h


def runs(report: object) -> list[str]:
    return sorted(r.entry or "checklist" for r in report.rows if r.decision == "run")  # type: ignore[attr-defined]


async def test_a_quiet_weekend_keeps_the_morning_brief(weekend: Harness) -> None:
    h = weekend
    h.user_session(CHAT)  # Friday noon, the last message before the weekend
    h.write(TASKS)
    h.fake.script([reply("No rain tomorrow.")])
    assert runs(await h.cycle()) == ["checklist"]  # scheduled entries start their clocks
    h.clock.set(MONDAY)  # nobody chatted since: the chat is older than stale_after (2d)
    h.fake.script([reply("Dry on Tuesday."), reply("Two meetings."), reply("Build green.")])
    report = await h.cycle()
    assert runs(report) == ["Builds", "Morning brief", "checklist"]
    assert [r.reason for r in report.rows if r.decision == "skip"] == ["stale"]  # the chat's row
    assert h.texts() == ["No rain tomorrow.", "Dry on Tuesday.", "Two meetings.", "Build green."]


async def test_a_home_where_nobody_chatted_runs_the_shared_checklist(weekend: Harness) -> None:
    h = weekend
    h.write(with_tasks("- Tell me how much disk space is free."))
    h.fake.script([reply("40 GB free.")])
    report = await h.cycle()
    assert runs(report) == ["checklist"]
    # no session at all: the owner is configured, so the owner gets it
    assert [(m.channel, m.chat_id, m.text) for m in h.sent] == [("telegram", "42", "40 GB free.")]


async def test_a_stale_chat_keeps_its_own_workspace_asleep_but_not_its_schedule(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    config = make_config(fake.base_url)
    config.bot.sandbox.mode = "per-session"
    async for h in build_harness(tmp_path, fake, config, clock=FakeClock(FRIDAY)):
        h.user_session(CHAT)
        own = h.rt.workspaces.path_for(CHAT).name
        h.write(TASKS, own)
        h.fake.script([reply("No rain tomorrow.")])
        assert runs(await h.cycle()) == ["checklist"]
        h.clock.set(MONDAY)
        h.fake.script([reply("Two meetings."), reply("Build green.")])
        report = await h.cycle()
        assert runs(report) == ["Builds", "Morning brief"]
        skipped = [(r.reason, r.session, r.error) for r in report.rows if r.decision == "skip"]
        assert sorted(skipped, key=str) == sorted(
            [("stale", str(CHAT), None), ("stale", None, "checklist")], key=str
        )
        assert h.model_calls() == 3
        # with the owner's chat stale, its results reach the owner all the same
        assert h.texts() == ["No rain tomorrow.", "Two meetings.", "Build green."]


async def test_results_with_no_owner_and_no_live_chat_wait_in_the_inbox(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    config = make_config(fake.base_url)
    config.bot.owner = None
    async for h in build_harness(tmp_path, fake, config, clock=FakeClock(FRIDAY)):
        h.user_session(CHAT, ago=timedelta(days=3))
        h.write(with_tasks("- Tell me how much disk space is free."))
        h.fake.script([reply("40 GB free.")])
        report = await h.cycle()
        assert [r.outcome for r in report.rows if r.decision == "run"] == ["inboxed"]
        assert h.sent == []
        assert [i.text for i in h.rt.delivery.inbox.items()] == ["40 GB free."]
