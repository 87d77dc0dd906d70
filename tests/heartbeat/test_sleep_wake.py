"""A suspended laptop: the wall clock jumps while the event loop's monotonic clock
stands still. The heartbeat notices the jump and runs what fell due, once each."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from tests.support.harness import Harness, build_harness, with_tasks
from vikingbot.clock import FakeClock, nap
from vikingbot.testing.fake_openai import FakeOpenAI


class CountingClock(FakeClock):
    """A fake clock that counts how often it is read (a napping loop reads it steadily)."""

    reads = 0

    def now(self):  # type: ignore[no-untyped-def]
        self.reads += 1
        return super().now()


async def _until(predicate, timeout_s: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def test_entries_due_during_a_suspend_run_once_each_soon_after_waking(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    clock = CountingClock(datetime(2026, 3, 10, 12, 0, tzinfo=UTC))
    async for h in build_harness(tmp_path, fake, clock=clock):
        await _suspend_and_wake(h, clock)


async def _suspend_and_wake(h: Harness, clock: CountingClock) -> None:
    h.user_session()
    h.write(
        with_tasks(
            "- every: 30m title: Mail task: Check the mail.",
            "- every: 1h title: Builds task: Check the builds.",
            "- daily: 14:00 title: Brief task: Give me the afternoon brief.",
        )
    )
    hb = h.hb

    def not_due() -> list[object]:
        return [r for r in hb.state.runs(limit=100) if r["reason"] == "not-due"]

    hb.nap_check_s = 0.05  # the production value is 5 s; the rule is the same
    stop = asyncio.Event()
    task = asyncio.create_task(hb.run_forever(stop))
    try:
        # the first cycle sees the entries; none is due yet (new entries wait)
        assert await _until(lambda: len(not_due()) == 3)
        await hb.drain(10)
        # the loop is napping once it keeps reading the clock with nothing to do
        reads = clock.reads
        assert await _until(lambda: clock.reads > reads + 20)
        assert h.model_calls() == 0
        clock.advance(hours=2)  # the lid was closed; nobody called wake()
        # the loop's own wait (60 s) would end a minute later: the jump ends it in
        # nap_check_s (the time limit is generous for a loaded machine)
        assert await _until(lambda: h.model_calls() >= 3, timeout_s=15)
        prompts = [r.last_user_text for r in h.fake.requests]
        for task_text in ("Check the mail", "Check the builds", "afternoon brief"):
            assert sum(task_text in p for p in prompts) == 1, prompts
        # the next cycle (asked for explicitly) finds nothing more due: no burst
        await hb.drain(10)  # the catch-up cycle's turns end
        calls = h.model_calls()
        seen = len(not_due())
        clock.advance(minutes=10)
        hb.wake()
        assert await _until(lambda: len(not_due()) == seen + 3)
        assert h.model_calls() == calls
    finally:
        stop.set()
        hb.stop()
        await asyncio.wait_for(task, 5)
        await hb.drain(5)


async def test_nap_reports_a_wall_clock_jump_and_ignores_a_steady_clock() -> None:
    clock = FakeClock()
    wake = asyncio.Event()
    steady = await nap(wake, 0.05, clock, check_s=0.01)
    assert steady == 0.0

    async def jump_later() -> None:
        await asyncio.sleep(0.02)
        clock.advance(hours=1)

    jumper = asyncio.create_task(jump_later())
    slept = await nap(wake, 30.0, clock, check_s=0.01)
    await jumper
    assert 3500 < slept <= 3600
    wake.set()
    assert await nap(wake, 30.0, clock) == 0.0


async def test_a_daily_slot_found_hours_late_is_missed_not_run(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(
            with_tasks(
                "- every: 30m title: Mail task: Check the mail.",
                "- daily: 13:00 title: Brief task: Give me the lunch brief.",
            )
        )
        await h.cycle()  # 12:00: both seen, neither due
        h.clock.advance(hours=5)  # the lid opens at 17:00, four hours after 13:00
        h.user_session()
        await h.cycle()
        rows: dict[str, dict[str, object]] = {}
        for r in h.hb.state.runs(limit=10):  # newest first: the latest row per entry
            rows.setdefault(r["entry"], r)
        assert rows["Brief"]["reason"] == "missed"
        assert "2026-03-10 13:00" in str(rows["Brief"]["error"])
        prompts = [r.last_user_text for r in h.fake.requests]
        assert sum("Check the mail" in p for p in prompts) == 1
        assert not any("lunch brief" in p for p in prompts)
        h.clock.advance(hours=20, minutes=5)  # the next day, 13:05: on time again
        h.user_session()
        await h.cycle()
        prompts = [r.last_user_text for r in h.fake.requests]
        assert sum("lunch brief" in p for p in prompts) == 1
