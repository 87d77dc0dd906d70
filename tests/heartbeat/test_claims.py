"""A unit's claim while its turn runs (heartbeat/claims.py), on SQLite with the harness's
clock: the fence proves the claim locally only while it is fresh, and asks the database
once that margin is gone; a late finisher whose claim was taken over delivers nothing."""

from __future__ import annotations

from pathlib import Path

from tests.support.harness import Harness, build_harness, with_tasks
from vikingbot.store.leases import Claim, Leases
from vikingbot.testing.fake_openai import FakeOpenAI

KEY = "hb:shared:checklist@first"  # the checklist's first run (runner.unit_key)


def _ran(report: object) -> list[tuple[str, str | None]]:
    return [(r.reason, r.outcome) for r in report.rows if r.decision == "run"]  # type: ignore[attr-defined]


async def test_a_turn_past_half_its_lease_renews_and_delivers(harness: Harness) -> None:
    """The claim is no longer provably fresh (10 s of a 15 s lease went by during the
    turn), so the check before the send asks the database: still ours, delivered."""
    h = harness
    h.user_session()
    h.write(with_tasks("- Check the build"))

    def slow(_req: object) -> str:
        h.clock.advance(seconds=10)
        return "The build is broken on main."

    h.fake.responder = slow
    report = await h.cycle()
    assert _ran(report) == [("due", "delivered")]
    assert h.texts() == ["The build is broken on main."]
    assert Leases(h.rt.store, h.clock).done(KEY)


async def test_a_late_finisher_whose_unit_was_taken_over_neither_sends_nor_records(
    harness: Harness,
) -> None:
    """The lease ran out during the turn and another gateway claimed the unit: the
    local proof has expired, the database says the claim is gone, nothing goes out."""
    h = harness
    h.user_session()
    h.write(with_tasks("- Check the build"))
    taken: list[object] = []

    def stalled(_req: object) -> str:
        h.clock.advance(seconds=16)  # past bot.gateway.lease_s (15 s)
        taken.append(Leases(h.rt.store, h.clock).claim(KEY, "gw-b:4242", 600))
        return "The build is broken on main."

    h.fake.responder = stalled
    report = await h.cycle()
    assert isinstance(taken[0], Claim)  # the other gateway holds the unit now
    assert h.texts() == [] and _ran(report) == []
    assert h.model_calls() == 1
    holder = Leases(h.rt.store, h.clock).holder(KEY)
    assert holder is not None and holder.holder == "gw-b:4242" and not holder.done


async def test_a_task_that_left_the_file_meanwhile_does_not_run(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """The second task was taken out of HEARTBEAT.md during the first turn (as another
    gateway that ran it would), so the file is read again under its claim and the task
    is not run."""
    async for h in build_harness(tmp_path, fake, mode="per-task"):
        h.user_session()
        h.write(with_tasks("- Water the plants", "- Call the bank"))

        def first(_req: object, h: Harness = h) -> str:
            h.write(with_tasks("- Water the plants"))
            return "Watered them."

        h.fake.responder = first
        report = await h.cycle()
        rows = [(r.entry, r.reason, r.error) for r in report.rows if r.entry]  # type: ignore[attr-defined]
        assert (
            "Call the bank",
            "busy",
            "this unit already ran (the entry is no longer active)",
        ) in rows
        assert h.model_calls() == 1


async def test_run_now_meets_a_run_now_of_another_process_as_busy(harness: Harness) -> None:
    """Issue 31: a manual run claims the scheduled unit's key, so a second `run-now`
    (another CLI process, no gateway: another owner) finds the first's claim; and the
    manual run gives the key back, so the scheduled run still comes."""
    h = harness
    h.user_session()
    h.write(with_tasks("- Check the build"))
    leases = Leases(h.rt.store, h.clock)
    other = leases.claim(KEY, "cli-b:4242", 600)  # the first run-now, still in its turn
    assert isinstance(other, Claim)
    report = await h.cycle("manual")
    busy = [(r.reason, r.error) for r in report.rows if r.decision == "skip"]
    assert busy == [("busy", "held by cli-b:4242")]
    assert h.model_calls() == 0
    leases.release(other)
    assert _ran(await h.cycle("manual")) == [("manual", "noop")]
    assert not leases.done(KEY)  # a manual run does not use up the scheduled unit
    assert _ran(await h.cycle()) == [("due", "noop")]
    assert h.model_calls() == 2
