"""Regressions of issue 11 and friends, through the real loop against the fake model server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.support.harness import TEMPLATE, Harness, build_harness, with_tasks
from tests.support.signatures import feed_setup, tick
from vikingbot.store.leases import Leases
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply


def runs(report: object) -> list[tuple[str | None, str, str | None]]:
    return [(r.entry, r.reason, r.outcome) for r in report.rows if r.decision == "run"]  # type: ignore[attr-defined]


async def at(h: Harness, when: datetime, trigger: str = "scheduled") -> object:
    h.clock.set(when)
    h.user_session()
    return await h.cycle(trigger)


async def test_daily_slot_fires_once_never_early(tmp_path: Path, fake: FakeOpenAI) -> None:
    """Defect 1: run-now three times at hh:mm:40 fired a daily hh:(mm+1) entry three times."""
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks("- daily: 12:01 title: Digest task: Summarise the news"))
        await h.cycle()  # 12:00, first seen
        early = datetime(2026, 3, 10, 12, 0, 40, tzinfo=UTC)
        for _ in range(3):
            assert runs(await at(h, early, "manual")) == []
        assert h.model_calls() == 0
        assert runs(await at(h, datetime(2026, 3, 10, 12, 1, 5, tzinfo=UTC))) == [
            ("Digest", "due", "noop")
        ]
        for minute in (2, 3):  # the slot fired: not again, scheduled or manual
            assert runs(await at(h, datetime(2026, 3, 10, 12, minute, tzinfo=UTC), "manual")) == []
        assert h.model_calls() == 1


async def test_no_work_releases_the_signature(tmp_path: Path, fake: FakeOpenAI) -> None:
    """Defect 2: news, then nothing, then the same news again wakes the agent again."""
    async for h in build_harness(tmp_path, fake):
        feed = feed_setup(h)
        h.rt.config.bot.heartbeat.checkers = {  # type: ignore[assignment]
            "feed": {"kind": "command", "command": ["cat", str(feed)]}  # empty output: no work
        }
        feed.write_text("/var 91% full\n")
        await h.cycle()
        assert await tick(h) == [("run", "due", "noop")]
        feed.write_text("")
        assert await tick(h) == [("skip", "no-work", None)]
        feed.write_text("/var 91% full\n")
        assert await tick(h) == [("run", "due", "noop")]
        assert h.model_calls() == 2


async def test_outage_parks_nothing_and_tells_the_owner_twice(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """Defect 6: a model outage is not a task failure; down and back are told once each."""
    async for h in build_harness(tmp_path, fake, mode="per-task", max_retries=2):
        h.user_session()
        path = h.write(
            with_tasks(
                "- Check the mail",
                "- every: 10m title: Builds task: Check the CI",
                "- daily: 13:00 title: Digest task: Summarise the news",  # inside the outage
            )
        )
        await h.cycle()  # the checklist entry runs, the scheduled one is first seen
        h.fake.default = error(503, "overloaded")
        outcomes: list[str | None] = []
        for _ in range(12):  # two hours of ticks
            report = await tick(h, "Builds")
            outcomes += [o for _, _, o in report]
        assert "parked" not in path.read_text()
        assert "provider-down" in outcomes and "failed" not in outcomes
        down_calls = h.model_calls()
        assert down_calls < 12  # backoff: most ticks wait without a model call
        h.fake.default = reply("HEARTBEAT_OK")
        for _ in range(4):  # the next try (at most 30 minutes away) gets through
            outcomes += [o for _, _, o in await tick(h, "Builds")]
        assert outcomes[-1] in ("noop", None) and "noop" in outcomes
        texts = h.texts()
        digest = [
            (r["outcome"], r["reason"])
            for r in h.hb.state.runs(limit=500)
            if r["entry"] == "Digest" and r["decision"] == "run"
        ]
        assert digest[0] == ("noop", "due")  # the slot waited for the model, then ran once
        assert [o for o, _ in digest[1:]] == ["provider-down"] * (len(digest) - 1)
        assert sum("cannot be reached" in t for t in texts) == 1
        assert sum("answers again" in t for t in texts) == 1
        assert not any("is parked" in t for t in texts)


async def test_checklist_failure_is_told_once(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks("- Check the build"))
        h.fake.default = error(400, "bad request")
        for _ in range(3):
            await tick(h, "")
        failed = [t for t in h.texts() if "checklist in workspace shared failed" in t]
        assert len(failed) == 1 and "bad request" in failed[0]
        h.fake.default = reply("HEARTBEAT_OK")
        await tick(h, "")
        h.fake.default = error(400, "bad request")
        await tick(h, "")  # a new run of failures after a success is news again
        assert sum("checklist in workspace shared failed" in t for t in h.texts()) == 2


async def test_problem_notice_is_keyed_by_content_not_line(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        broken = "- every: 10m daily: 09:00 title: Broken task: x"
        h.write(with_tasks(broken))
        await h.cycle()
        h.write(with_tasks("- Water the plants", broken))  # the problem moves a line down
        await tick(h, "")
        assert sum("HEARTBEAT.md problem" in t for t in h.texts()) == 1


async def test_the_active_entry_completes_not_its_checked_lookalike(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """Issue 17 item 3: `- [x] Water the plants` in Completed must not take the outcome."""
    async for h in build_harness(tmp_path, fake, mode="per-task"):
        h.user_session()
        text = TEMPLATE.replace(
            "below this line -->\n", "below this line -->\n- Water the plants\n"
        ).replace(
            "delete them -->\n", "delete them -->\n- [x] Water the plants (done 2026-03-01)\n"
        )
        path = h.write(text)
        report = await h.cycle()
        assert runs(report) == [("Water the plants", "due", "completed")]
        after = path.read_text()
        active = after.split("## Completed")[0]
        assert "- Water the plants" not in active
        assert "(done 2026-03-01)" in after and "(done 2026-03-10)" in after


async def test_a_unit_held_by_another_gateway_is_busy(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks("- Check the build"))
        other = Leases(h.rt.store, h.clock).claim("hb:shared:checklist@first", "gw-b:4242", 600)
        report = await h.cycle()
        busy = [(r.reason, r.error) for r in report.rows if r.reason == "busy"]  # type: ignore[attr-defined]
        assert busy == [("busy", "held by gw-b:4242")] and h.model_calls() == 0
        Leases(h.rt.store, h.clock).release(other)  # type: ignore[arg-type]
        later = await at(h, h.clock.now() + timedelta(minutes=10))
        assert runs(later) == [(None, "due", "noop")]


async def test_manual_run_does_not_move_the_cadence(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks("- Check the build"))
        start = h.clock.now()
        assert len(runs(await h.cycle())) == 1  # 12:00, cadence 10 minutes
        assert len(runs(await at(h, start + timedelta(minutes=5), "manual"))) == 1
        assert len(runs(await at(h, start + timedelta(minutes=10)))) == 1  # on the old rhythm
        assert h.model_calls() == 3
