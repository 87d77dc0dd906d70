"""The heartbeat cycle end to end in one process: real loop, real SDK, fake model server."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.harness import (
    OWNER,
    TEMPLATE,
    Harness,
    build_harness,
    make_config,
    with_tasks,
)
from vikingbot.gateway import compose
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply, tool_call


async def test_template_makes_no_model_call(harness: Harness) -> None:
    harness.user_session()
    harness.write(TEMPLATE)
    report = await harness.cycle()
    assert harness.model_calls() == 0
    assert [(r.decision, r.reason) for r in report.rows] == [("skip", "empty")]


async def test_one_task_one_call_and_message_reaches_owner(harness: Harness) -> None:
    harness.user_session()
    harness.write(with_tasks("- Check whether the build is green"))
    harness.fake.script(
        [tool_call("message", {"text": "The build is red since 11:40."}), reply("HEARTBEAT_OK")]
    )
    report = await harness.cycle()
    assert harness.model_calls() == 2  # the turn: tool call, then the final reply
    first = harness.fake.requests[0]
    assert first.last_user_text.startswith("Read HEARTBEAT.md in your workspace (if it exists).")
    assert [m.text for m in harness.sent] == ["The build is red since 11:40."]
    assert (harness.sent[0].channel, harness.sent[0].chat_id) == ("telegram", "42")
    (row,) = [r for r in report.rows if r.decision == "run"]
    assert row.outcome == "delivered" and row.model_calls == 2


async def test_heartbeat_ok_delivers_nothing_and_leaves_history(harness: Harness) -> None:
    harness.user_session()
    harness.write(with_tasks("- Check the mail"))
    before = harness.rt.sessions.read_messages(OWNER)
    harness.fake.script([reply("HEARTBEAT_OK")])
    report = await harness.cycle()
    assert harness.model_calls() == 1
    assert harness.sent == []
    assert harness.rt.sessions.read_messages(OWNER) == before
    hb_key = harness.hb.heartbeat_session_key("shared")
    assert harness.rt.sessions.read_messages(hb_key) == []
    assert [r.outcome for r in report.rows if r.decision == "run"] == ["noop"]


async def test_plain_reply_without_message_tool_is_still_delivered(harness: Harness) -> None:
    harness.user_session()
    harness.write(with_tasks("- Check the mail"))
    harness.fake.script([reply("Two new invoices arrived.")])
    await harness.cycle()
    assert harness.texts() == ["Two new invoices arrived."]


async def test_incomplete_keep_result_is_not_delivered(harness: Harness) -> None:
    harness.user_session()
    harness.write(with_tasks("- Check the mail"))
    harness.fake.script([reply("Half done, more next time. HEARTBEAT_KEEP")])
    report = await harness.cycle()
    assert harness.texts() == []
    assert [r.outcome for r in report.rows if r.decision == "run"] == ["kept"]


async def test_stale_and_skip_flag_sessions_make_no_call(tmp_path: Path, fake: FakeOpenAI) -> None:
    config = make_config(fake.base_url)
    config.bot.sandbox.mode = "per-session"
    async for harness in build_harness(tmp_path, fake, config):
        chat = SessionKey("telegram", "default", "1")
        harness.user_session(chat, ago=timedelta(days=3))
        terminal = SessionKey("cli", "default", "local")
        harness.rt.sessions.get_or_create(terminal, skip_heartbeat=True)
        for key in (chat, terminal):
            harness.write(with_tasks("- Something"), harness.rt.workspaces.path_for(key).name)
        report = await harness.cycle()
        assert harness.model_calls() == 0
        # each chat's own workspace sleeps: the sessions' rows and each checklist's
        assert sorted(r.reason for r in report.rows) == ["skip-flag", "stale", "stale", "stale"]


async def test_cadence_one_run_per_interval(harness: Harness) -> None:
    harness.user_session()
    harness.write(with_tasks("- Check the mail"))
    await harness.cycle()
    assert harness.model_calls() == 1
    harness.clock.advance(seconds=300)
    report = await harness.cycle()
    assert harness.model_calls() == 1
    assert [r.reason for r in report.rows] == ["not-due"]
    harness.clock.advance(seconds=300)
    await harness.cycle()
    assert harness.model_calls() == 2


async def test_disabled_and_quiet_hours(harness: Harness) -> None:
    harness.user_session()
    harness.write(with_tasks("- Check the mail"))
    harness.rt.config.bot.heartbeat.enabled = False
    report = await harness.cycle()
    assert [r.reason for r in report.rows] == ["disabled"] and harness.model_calls() == 0
    harness.rt.config.bot.heartbeat.enabled = True
    # 12:00 UTC is 13:00 in Berlin: outside 22:00-07:00
    harness.rt.config.bot.heartbeat.active_hours = {
        "start": "22:00",
        "end": "07:00",
        "timezone": "Europe/Berlin",
    }  # type: ignore[assignment]
    report = await harness.cycle()
    assert [r.reason for r in report.rows] == ["quiet-hours"] and harness.model_calls() == 0
    harness.clock.advance(hours=10)  # 23:00 Berlin: inside the window that wraps midnight
    await harness.cycle()
    assert harness.model_calls() == 1


async def test_two_run_nows_at_once_run_the_workspace_once(harness: Harness) -> None:
    """The second finds the workspace busy, even when both plan at the same moment (a
    run-now typed twice, or beside the scheduled cycle)."""
    import asyncio

    harness.user_session()
    harness.write(with_tasks("- Check the mail"))
    harness.fake.script([reply("HEARTBEAT_OK", delay_s=60)])  # held until released
    cycles = [asyncio.create_task(harness.cycle("manual")) for _ in range(2)]
    done, _ = await asyncio.wait(cycles, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    assert done, "neither cycle ended while the model held its answer"
    harness.fake.release()
    rows = [r for c in cycles for r in (await c).rows if r.workspace == "shared"]
    assert sorted((r.decision, r.reason) for r in rows) == [("run", "manual"), ("skip", "busy")]
    assert harness.model_calls() == 1


async def test_provider_that_never_answers_times_out_and_next_cycle_runs(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    # 2 s, not less: the second cycle's quick answer must fit in the same limit on a
    # loaded machine (at 0.5 s it sometimes timed out too).
    async for h in build_harness(tmp_path, fake, task_timeout_s=2.0):
        h.user_session()
        h.write(with_tasks("- Slow thing"))
        h.fake.script([reply("late", delay_s=30)])
        report = await h.cycle()
        assert [r.outcome for r in report.rows if r.decision == "run"] == ["timeout"]
        h.clock.advance(seconds=600)
        h.fake.script([reply("HEARTBEAT_OK")])
        report = await h.cycle()
        assert [r.outcome for r in report.rows if r.decision == "run"] == ["noop"]


async def test_budget_pauses_workspace_and_tells_owner(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake, budget={"daily_tokens": 50}):
        h.user_session()
        h.write(with_tasks("- Check the mail"))
        h.fake.script([reply("HEARTBEAT_OK", tokens_in=40, tokens_out=20)])
        await h.cycle()
        assert h.model_calls() == 1
        assert any("daily budget is used up" in t for t in h.texts())
        h.clock.advance(seconds=600)
        report = await h.cycle()
        assert [r.reason for r in report.rows] == ["budget"] and h.model_calls() == 1
        h.hb.resume("shared")
        await h.cycle()
        assert h.model_calls() == 2


async def test_per_task_lifecycle_keep_then_complete(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake, mode="per-task"):
        h.user_session()
        path = h.write(
            with_tasks("- Renew the passport <!-- deliver:telegram:42 -->", "- Water the plants")
        )
        h.fake.script([reply("Still waiting for the photo. HEARTBEAT_KEEP"), reply("Watered.")])
        await h.cycle()
        text = path.read_text()
        assert "- Renew the passport <!-- deliver:telegram:42 -->\n" in text  # kept, tag intact
        assert "- [x] Water the plants (done 2026-03-10)" in text.split("## Completed")[1]
        assert h.texts() == ["Watered."]  # KEEP is never delivered
        prompt = h.fake.requests[0].last_user_text
        assert "HEARTBEAT_KEEP" in prompt and "Renew the passport" in prompt


async def test_failing_task_retries_then_parks_and_tells_owner_once(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async for h in build_harness(tmp_path, fake, mode="per-task", max_retries=3):
        h.user_session()
        path = h.write(with_tasks("- Fragile job"))
        h.fake.default = error(400, "bad request")
        outcomes = []
        for _ in range(5):
            report = await h.cycle()
            outcomes += [(r.decision, r.reason, r.outcome) for r in report.rows]
            h.clock.advance(seconds=600)
        runs = [o for o in outcomes if o[0] == "run"]
        assert [o[2] for o in runs] == ["failed", "failed", "parked"]
        assert ("skip", "parked", None) in outcomes
        assert "<!-- parked:" in path.read_text()
        assert sum("is parked after 3 failed runs" in t for t in h.texts()) == 1
        # the user edits the entry: it runs again
        path.write_text(path.read_text().replace("Fragile job", "Fragile job, retried"))
        h.fake.default = reply("HEARTBEAT_OK")
        report = await h.cycle()
        assert [r.outcome for r in report.rows if r.decision == "run"] == ["completed"]


@pytest.mark.parametrize("mode", ["shared", "per-channel", "per-session"])
async def test_sandbox_modes_resolve_workspaces(
    tmp_path: Path, fake: FakeOpenAI, mode: str
) -> None:
    async for h in build_harness(tmp_path, fake):
        h.rt.config.bot.sandbox.mode = mode  # type: ignore[assignment]
        a, b = SessionKey("telegram", "default", "42"), SessionKey("slack", "T1", "C9")
        h.user_session(a)
        h.user_session(b)
        for key in (a, b):
            ws = h.rt.workspaces.workspace_for(key)
            (ws / "HEARTBEAT.md").write_text(with_tasks("- Task"))
        report = await h.cycle()
        runs = [r for r in report.rows if r.decision == "run"]
        assert len(runs) == (1 if mode == "shared" else 2)
        assert h.model_calls() == len(runs)


async def test_target_all_fans_out_one_turn_per_session(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake, target="all"):
        h.rt.config.bot.channels.telegram.allow_from = ["42", "43"]
        h.user_session(SessionKey("telegram", "default", "42"))
        h.user_session(SessionKey("telegram", "default", "43"))
        h.write(with_tasks("- Say hi"))
        h.fake.responder = lambda req: "Hi there"
        await h.cycle()
        assert h.model_calls() == 2
        assert sorted(m.chat_id for m in h.sent) == ["42", "43"]


async def test_restart_mid_interval_neither_starves_nor_doubles(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    import asyncio

    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks("- Task"))
        await h.hb.run_cycle()
        h.hb._mark_cycle(h.clock.now())
        assert h.model_calls() == 1
        # "restart" 4 minutes later: a new service reads the persisted cadence
        h.clock.advance(minutes=4)
        fresh = compose.heartbeat(h.rt)
        assert fresh._next_cycle_at() == h.clock.now() + timedelta(minutes=6)
        # after a long downtime exactly one cycle is due now, not a burst
        h.clock.advance(hours=20)
        h.user_session()  # the user is still around
        assert fresh._next_cycle_at() <= h.clock.now()
        stop = asyncio.Event()
        task = asyncio.create_task(fresh.run_forever(stop))
        for _ in range(200):
            await asyncio.sleep(0.02)
            if h.model_calls() >= 2:
                break
        stop.set()
        fresh.stop()
        await asyncio.wait_for(task, 5)
        await fresh.drain(5)
        assert h.model_calls() == 2


async def test_a_hanging_turn_does_not_hold_up_the_next_cycle(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """The loop ticks on time while a turn hangs; the tick finds the workspace `busy`."""
    import asyncio

    async for h in build_harness(tmp_path, fake, task_timeout_s=60):
        h.user_session()
        h.write(with_tasks("- Slow thing"))
        h.fake.script([reply("late", delay_s=30)])
        stop = asyncio.Event()
        loop_task = asyncio.create_task(h.hb.run_forever(stop))
        try:
            for _ in range(200):  # the first cycle starts at once and its turn hangs
                await asyncio.sleep(0.02)
                if h.model_calls() == 1:
                    break
            assert h.model_calls() == 1
            h.clock.advance(seconds=600)
            h.hb.wake()
            reasons: list[str] = []
            for _ in range(200):
                await asyncio.sleep(0.02)
                reasons = [r["reason"] for r in h.hb.state.runs(limit=10)]
                if "busy" in reasons:
                    break
            assert "busy" in reasons
            assert h.model_calls() == 1  # no second turn for the busy workspace
        finally:
            stop.set()
            h.hb.stop()
            await asyncio.wait_for(loop_task, 5)
            await h.hb.drain(0.1)  # cancels the hanging turn


async def test_a_stop_that_comes_while_the_loop_works_out_the_next_cycle_ends_it_at_once(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """The gateway stops the heartbeat while its loop is between two awaits (reading
    when the last cycle was, in a worker thread): the stop must not be lost and the loop
    left waiting for the next cycle (up to a minute before it looked again)."""
    import asyncio
    from collections.abc import Callable
    from datetime import UTC, datetime

    from vikingbot.clock import FakeClock
    from vikingbot.heartbeat.service import GLOBAL

    class StopOnRead(FakeClock):
        """Calls ``then`` the first time the time is read after it is set."""

        then: Callable[[], None] | None = None

        def now(self) -> datetime:
            then, self.then = self.then, None
            if then is not None:
                then()
            return super().now()

    clock = StopOnRead(datetime(2026, 3, 10, 12, 0, tzinfo=UTC))
    async for h in build_harness(tmp_path, fake, clock=clock):
        hb = h.hb
        hb.state.mark_cycle(GLOBAL, clock.now())  # a cycle a moment ago: the next is not due
        clock.then = hb.stop  # the stop comes as the loop reads the time after the thread hop
        loop_task = asyncio.create_task(hb.run_forever())
        try:
            await asyncio.wait_for(asyncio.shield(loop_task), 5)
        finally:
            loop_task.cancel()
        assert clock.then is None  # the loop did read the time (the stop came mid-loop)
        assert h.model_calls() == 0


async def test_pause_during_a_turn_is_not_undone_when_it_ends(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    from vikingbot.heartbeat.service import HeartbeatService

    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks("- Check the mail"))
        cli = compose.heartbeat(h.rt)  # as `vikingbot heartbeat pause` would, from another process

        def pause_meanwhile(_req: object, cli: HeartbeatService = cli) -> str:
            cli.pause("shared")
            return "HEARTBEAT_OK"

        h.fake.responder = pause_meanwhile
        await h.cycle()
        h.clock.advance(seconds=600)
        report = await h.cycle()
        assert [r.reason for r in report.rows] == ["paused"]
        assert h.model_calls() == 1


async def test_a_units_claim_ends_with_its_commit(harness: Harness) -> None:
    """Nothing is held after the cycle, and each run's claim (the checklist's, a
    scheduled slot's) is closed for good: committed with the unit's results. The next
    run of a unit asks for the key of the run it follows, a new one."""
    from vikingbot.store.leases import Leases

    harness.user_session()
    harness.write(with_tasks("- Check the mail", "- every: 1h title: Plants task: Water them"))
    harness.clock.advance(hours=2)  # a new scheduled entry first runs one interval later
    report = await harness.cycle()
    harness.clock.advance(hours=2)
    report = await harness.cycle()
    ran = [r for r in report.rows if r.decision == "run"]
    assert sorted(r.entry or "checklist" for r in ran) == ["Plants", "checklist"]
    leases = Leases(harness.rt.store, harness.clock)
    assert leases.holders("hb:") == []  # nothing is held after the cycle
    # an every: entry's claim is keyed by the run it follows (runner.unit_key)
    slot = [k for k in _all_leases(harness) if k.startswith("hb:shared:Plants@")]
    assert len(slot) == 1 and leases.done(slot[0])
    checklist = [k for k in _all_leases(harness) if k.startswith("hb:shared:checklist@")]
    assert len(checklist) == 2 and all(leases.done(k) for k in checklist)  # one per run


def _all_leases(harness: Harness) -> list[str]:
    from sqlalchemy import select

    from vikingbot.store.tables import leases

    with harness.rt.store.engine.connect() as conn:
        return [k for (k,) in conn.execute(select(leases.c.key))]
