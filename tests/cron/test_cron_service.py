"""The cron runner on a FakeClock: each kind runs when due, catch-up, timeouts, bad jobs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import sqlalchemy as sa

from vikingbot.cron.service import CronService
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import CronError
from vikingbot.store.tables import cron_jobs

if TYPE_CHECKING:
    from conftest import CronRig

START = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # the rig's clock starts here


async def test_every_job_runs_when_due_and_delivers_the_reply(rig: CronRig) -> None:
    rig.service.jobs.add("mail", "every", "30m", "Check my mail", target="telegram:7")
    assert await rig.service.tick() == []  # not due yet
    rig.clock.advance(minutes=29)
    assert await rig.service.tick() == []
    rig.clock.advance(minutes=1)
    [run] = await rig.service.tick()
    assert run.outcome == "delivered"
    [(prompt, key, meta)] = rig.agent.turns
    assert "Check my mail" in prompt
    assert str(key) == "cron:default:mail"
    assert meta["unattended"] is True and meta["cron"] == "mail"
    assert meta["run_id"] == run.run_id and meta["workspace"].endswith("shared")
    assert rig.sent.chats == [("telegram:7", "Done: 3 new mails.", "cron:mail")]
    assert rig.sent.messages[0].dedupe_key == run.run_id  # one outbox row per run
    [recorded] = rig.sessions.read_messages("telegram:default:7")  # the chat has context
    assert recorded.content == "Done: 3 new mails." and recorded.role == "assistant"
    meta_row = rig.sessions.get_meta(key)
    assert meta_row is not None and meta_row.skip_heartbeat
    job = rig.service.jobs.require("mail")
    assert job.last_outcome == "delivered"
    assert job.next_run_at == START + timedelta(hours=1)
    assert await rig.service.tick() == []  # same instant: not again


async def test_at_job_runs_once_then_is_disabled(rig: CronRig) -> None:
    rig.service.jobs.add("once", "at", "2026-01-05T14:00", "Remind me", timezone="Europe/Berlin")
    rig.clock.advance(minutes=59)
    assert await rig.service.tick() == []
    rig.clock.advance(minutes=1)  # 13:00 UTC = 14:00 Berlin
    [run] = await rig.service.tick()
    assert run.outcome == "delivered"
    assert rig.sent.chats[0][0] == "telegram:42"  # bot.heartbeat.target "owner" by default
    job = rig.service.jobs.require("once")
    assert not job.enabled and job.next_run_at is None
    assert job.to_dict()["status"] == "done"
    rig.clock.advance(days=2)
    assert await rig.service.tick() == []


async def test_cron_job_follows_its_timezone(rig: CronRig) -> None:
    rig.service.jobs.add("standup", "cron", "0 9 * * 1-5", "Plan my day", timezone="Asia/Tokyo")
    job = rig.service.jobs.require("standup")
    # Monday 12:00 UTC is 21:00 in Tokyo: the next 09:00 JST is Tuesday 00:00 UTC
    assert job.next_run_at == START.replace(hour=0) + timedelta(days=1)
    rig.clock.set(job.next_run_at - timedelta(seconds=1))
    assert await rig.service.tick() == []
    rig.clock.advance(seconds=1)
    assert [r.outcome for r in await rig.service.tick()] == ["delivered"]


async def test_after_three_days_down_an_hourly_job_runs_once(rig: CronRig) -> None:
    rig.service.jobs.add("hourly", "every", "1h", "Anything new?")
    rig.clock.advance(days=3, minutes=10)  # 72 slots missed
    runs = await rig.service.tick()
    assert len(runs) == 1
    assert await rig.service.tick() == []
    assert len(rig.agent.turns) == 1
    job = rig.service.jobs.require("hourly")
    assert job.next_run_at == START + timedelta(days=3, hours=1)  # back on its grid
    rig.clock.set(START + timedelta(days=3, hours=1))
    assert len(await rig.service.tick()) == 1


async def test_noop_reply_is_not_delivered(rig: CronRig) -> None:
    rig.agent.reply = "HEARTBEAT_OK"
    rig.service.jobs.add("quiet", "every", "1h", "Anything?")
    rig.clock.advance(hours=1)
    [run] = await rig.service.tick()
    assert run.outcome == "noop"
    assert rig.sent.messages == []


async def test_timeout_is_recorded_and_the_session_reset(rig: CronRig) -> None:
    rig.agent.hang = True
    rig.service.jobs.add("slow", "every", "1h", "Take forever", timeout_s=0.05)
    rig.sessions.get_or_create("cron:default:slow", skip_heartbeat=True)
    rig.clock.advance(hours=1)
    [run] = await rig.service.tick()
    assert run.outcome == "timeout" and "0.05s" in (run.error or "")
    assert rig.sent.messages == []
    job = rig.service.jobs.require("slow")
    assert job.last_outcome == "timeout"
    assert job.next_run_at == START + timedelta(hours=2)


async def test_agent_failure_is_recorded_and_audited(rig: CronRig) -> None:
    rig.agent.error = CronError("provider exploded")
    rig.service.jobs.add("boom", "every", "1h", "Try")
    rig.clock.advance(hours=1)
    [run] = await rig.service.tick()
    assert run.outcome == "error"
    assert rig.service.jobs.require("boom").last_error == "provider exploded"
    [event] = rig.store.audit_events(action="cron.run")
    assert event["subject"] == "boom" and event["outcome"] == "error"
    assert rig.service.metrics["runs_error_total"] == 1


async def test_a_failed_send_is_kept_in_the_inbox(rig: CronRig) -> None:
    rig.sent.fail = True
    rig.service.jobs.add("x", "every", "1h", "Try")
    rig.clock.advance(hours=1)
    [run] = await rig.service.tick()
    assert run.outcome == "inboxed" and "kept in the inbox" in (run.error or "")
    [kept] = rig.service.delivery.inbox.items()  # not lost: in the local inbox
    assert kept.text == "Done: 3 new mails." and "cron:x" in (kept.source or "")


async def test_a_target_not_on_the_allowlist_goes_to_the_owner(rig: CronRig) -> None:
    rig.service.jobs.add("leak", "every", "1h", "Post it", target="telegram:666")
    rig.clock.advance(hours=1)
    [run] = await rig.service.tick()
    assert run.outcome == "delivered"
    assert rig.sent.chats == [("telegram:42", "Done: 3 new mails.", "cron:leak")]
    [event] = rig.store.audit_events(action="delivery.refuse")
    assert event["subject"] == "telegram:666" and event["actor"] == "cron:leak"


async def test_target_last_picks_the_latest_chat_of_the_job_workspace(rig: CronRig) -> None:
    from vikingbot.session.types import Message

    for chat, minutes in (("7", 5), ("42", 50)):
        rig.sessions.append(
            f"telegram:default:{chat}",
            Message("user", "hi", rig.clock.now() - timedelta(minutes=minutes)),
        )
    rig.service.jobs.add("followup", "every", "1h", "Follow up", target="last")
    rig.clock.advance(hours=1)
    await rig.service.tick()
    assert [c[0] for c in rig.sent.chats] == ["telegram:7"]


async def test_job_broken_in_the_database_is_reported_not_dropped(rig: CronRig) -> None:
    rig.service.jobs.add("broken", "cron", "0 9 * * *", "Report", timezone="Europe/Berlin")
    rig.service.jobs.add("fine", "every", "1h", "Fine")
    with rig.store.engine.begin() as conn:
        conn.execute(
            sa.update(cron_jobs)
            .where(cron_jobs.c.name == "broken")
            .values(timezone="Europe/Atlantis", next_run_at=START)
        )
    rig.clock.advance(hours=1)
    runs = await rig.service.tick()
    assert [r.job for r in runs] == ["fine"]  # the good job still runs
    job = rig.service.jobs.require("broken")
    assert job.last_outcome == "invalid" and "Europe/Atlantis" in (job.last_error or "")
    assert job.to_dict()["status"] == "invalid"
    [event] = rig.store.audit_events(action="cron.invalid")
    assert event["subject"] == "broken"
    told = [c for c in rig.sent.chats if c[2] == "cron:broken"]
    assert len(told) == 1 and told[0][0] == "telegram:42"  # the owner
    assert "Europe/Atlantis" in told[0][1]
    await rig.service.tick()  # reported once, not on every tick
    assert len(rig.store.audit_events(action="cron.invalid")) == 1
    assert len([c for c in rig.sent.chats if c[2] == "cron:broken"]) == 1


async def test_run_now_runs_a_job_off_schedule(rig: CronRig) -> None:
    rig.service.jobs.add("manual", "every", "1d", "Summarise")
    run = await rig.service.run_now("manual")
    assert run.manual and run.outcome == "delivered"
    assert rig.service.jobs.require("manual").next_run_at == START + timedelta(days=1)


async def test_run_interrupted_by_a_crash_is_reported_on_start(rig: CronRig) -> None:
    rig.service.jobs.add("crash", "every", "1h", "Work")
    rig.service.jobs.update("crash", last_outcome="running")
    await rig.service.tick()
    assert rig.service.jobs.require("crash").last_outcome == "interrupted"


async def test_a_broken_job_is_told_once_again_after_a_fix_and_a_restart_keeps_quiet(
    rig: CronRig,
) -> None:
    """Cron tells the owner through the heartbeat's Notifier: once per job and reason,
    across restarts; fixed and broken again, it is news again (a new dedupe key, so the
    outbox, which sends a key once, sends it)."""

    def break_job(timezone: str) -> None:
        with rig.store.engine.begin() as conn:
            conn.execute(
                sa.update(cron_jobs)
                .where(cron_jobs.c.name == "broken")
                .values(timezone=timezone, next_run_at=rig.clock.now())
            )

    def told() -> list[OutboundMessage]:
        return [m for m in rig.sent.messages if "cannot run" in m.text]

    rig.service.jobs.add("broken", "every", "1h", "Report")
    break_job("Europe/Atlantis")
    await rig.service.tick()
    restarted = CronService(
        rig.service.config,
        store=rig.store,
        agent=rig.agent,
        delivery=rig.service.delivery,
        sessions=rig.sessions,
        workspaces=rig.service.workspaces,
        clock=rig.clock,
    )
    rig.clock.advance(minutes=5)
    await restarted.tick()
    assert len(told()) == 1  # not again after the restart

    break_job("UTC")  # fixed
    rig.clock.advance(minutes=5)
    await restarted.tick()
    break_job("Europe/Atlantis")  # the same problem once more
    rig.clock.advance(minutes=5)
    await restarted.tick()
    first, again = told()
    assert "Europe/Atlantis" in again.text
    assert first.dedupe_key != again.dedupe_key
    assert len(rig.store.audit_events(action="cron.invalid")) == 2


async def test_a_removed_jobs_notices_go_with_it(rig: CronRig) -> None:
    """The owner was told once that a job cannot run; the job was removed, but its notice
    row stayed, so the same job added again and broken the same way was never told."""
    from vikingbot.cron.notices import LEGACY_SCOPE, invalid_key
    from vikingbot.heartbeat.notices import digest_of
    from vikingbot.store.tables import notices

    def break_job() -> None:
        with rig.store.engine.begin() as conn:
            conn.execute(
                sa.update(cron_jobs)
                .where(cron_jobs.c.name == "broken")
                .values(timezone="Europe/Atlantis", next_run_at=rig.clock.now())
            )

    def told() -> list[OutboundMessage]:
        return [m for m in rig.sent.messages if "cannot run" in m.text]

    def rows() -> list[tuple[str, str]]:
        with rig.store.engine.connect() as conn:
            found = conn.execute(sa.select(notices.c.workspace, notices.c.digest)).fetchall()
        return [(w, d) for w, d in found]

    rig.service.jobs.add("broken", "every", "1h", "Report")
    break_job()
    await rig.service.tick()
    assert len(told()) == 1 and len(rows()) == 1
    # a row kept the old way (every job under one scope) goes too
    reason = rig.service.jobs.require("broken").last_error or ""
    legacy = digest_of(invalid_key("broken", reason))
    with rig.store.engine.begin() as conn:
        conn.execute(
            sa.insert(notices).values(
                workspace=LEGACY_SCOPE, digest=legacy, kind="cron-invalid", at=rig.clock.now()
            )
        )

    rig.service.jobs.remove("broken")
    assert rows() == []  # nothing left of the job

    rig.service.jobs.add("broken", "every", "1h", "Report")
    break_job()
    rig.clock.advance(minutes=5)
    await rig.service.tick()
    first, again = told()  # the new job's problem is news
    assert "Europe/Atlantis" in again.text and first.dedupe_key != again.dedupe_key
