"""The planner: every skip reason and run decision, on fixed times, no I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from vikingbot.config.schema import HeartbeatConfig
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.planner import WorkspaceInput, plan_workspace
from vikingbot.heartbeat.state import EntryState, WorkspaceState, text_hash
from vikingbot.session.types import SessionKey, SessionMeta

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
UTCZ = ZoneInfo("UTC")
TEMPLATE = """# Heartbeat Tasks

## Active Tasks

<!-- Add your periodic tasks below this line -->

## Completed

<!-- Move completed tasks here or delete them -->
"""
ONE_TASK = TEMPLATE.replace("below this line -->\n", "below this line -->\n- Check the build\n")


def meta(
    chat: str = "1", *, last_user: timedelta | None = timedelta(hours=1), skip: bool = False
) -> SessionMeta:
    return SessionMeta(
        key=SessionKey("telegram", "default", chat),
        created_at=NOW - timedelta(days=10),
        updated_at=NOW,
        last_user_at=None if last_user is None else NOW - last_user,
        metadata={"skip_heartbeat": skip} if skip else {},
    )


def plan(
    text: str | None,
    *,
    sessions=None,
    state=None,
    entries=None,
    busy=False,
    cfg=None,
    trigger="scheduled",
    name="shared",
):
    parsed = None if text is None else parse_heartbeat(text)
    ws = WorkspaceInput(
        name=name,
        sessions=[meta()] if sessions is None else sessions,
        parsed=parsed,
        state=state or WorkspaceState("shared"),
        entries=entries or {},
        busy=busy,
        shared=name == "shared",
    )
    return plan_workspace(
        ws, cfg=cfg or HeartbeatConfig(), now=NOW, tz=UTCZ, trigger=trigger, today="2026-03-10"
    )


def reasons(decisions) -> list[tuple[str, str]]:
    return [(d.decision, d.reason) for d in decisions]


def test_template_is_empty_no_run() -> None:
    assert reasons(plan(TEMPLATE)) == [("skip", "empty")]


def test_one_task_runs_one_checklist_turn() -> None:
    ds = plan(ONE_TASK)
    assert reasons(ds) == [("run", "due")]
    assert ds[0].unit is not None and ds[0].unit.kind == "checklist"


CHAT_WS = "telegram-default-1"  # a chat's own workspace (per-session or per-channel)
SCHEDULED = ONE_TASK.replace(
    "- Check the build\n",
    "- Check the build\n- daily: 08:30 title: Morning brief task: Give me my calendar\n"
    "- every: 30m title: Builds task: Check CI\n",
)
SEEN_DAYS_AGO = {
    e: EntryState("w", e, first_seen=NOW - timedelta(days=3)) for e in ("Morning brief", "Builds")
}


def test_skip_flag_and_stale_sessions() -> None:
    sessions = [meta("a", skip=True), meta("b", last_user=timedelta(days=3))]
    # a chat's own workspace: its checklist sleeps while nobody talks there
    ds = plan(ONE_TASK, sessions=sessions, name=CHAT_WS)
    assert reasons(ds) == [("skip", "skip-flag"), ("skip", "stale"), ("skip", "stale")]
    assert ds[-1].session is None and ds[-1].detail == "checklist"
    # the shared workspace's checklist is a standing order
    ds = plan(ONE_TASK, sessions=sessions)
    assert reasons(ds) == [("skip", "skip-flag"), ("skip", "stale"), ("run", "due")]


@pytest.mark.parametrize("name", ["shared", CHAT_WS])
def test_scheduled_entries_run_after_a_quiet_weekend(name: str) -> None:
    ds = plan(
        SCHEDULED,
        sessions=[meta(last_user=timedelta(days=3))],
        entries=SEEN_DAYS_AGO,
        name=name,
    )
    runs = {d.entry for d in ds if d.decision == "run" and d.entry}
    assert runs == {"Morning brief", "Builds"}
    checklist = [d for d in ds if d.entry is None and d.session is None]
    assert reasons(checklist) == [("run", "due") if name == "shared" else ("skip", "stale")]


def test_the_shared_workspace_runs_before_anyone_chatted() -> None:
    ds = plan(SCHEDULED, sessions=[], entries=SEEN_DAYS_AGO)
    assert sorted(reasons(ds)) == [("run", "due")] * 3
    # any other folder nobody chats from is not read
    assert reasons(plan(SCHEDULED, sessions=[], name=CHAT_WS)) == [("skip", "no-sessions")]


def test_a_chat_flagged_off_keeps_its_own_workspace_asleep() -> None:
    ds = plan(SCHEDULED, sessions=[meta(skip=True)], entries=SEEN_DAYS_AGO, name=CHAT_WS)
    assert reasons(ds) == [("skip", "skip-flag")]


STALE = ("skip", "stale")  # the checklist of a chat's own workspace, while nobody talks


def terminal(*, last_user: timedelta | None = timedelta(hours=1)) -> SessionMeta:
    """`vikingbot chat`'s session: created with the skip flag."""
    m = meta(last_user=last_user, skip=True)
    return SessionMeta(
        SessionKey("cli", "default", "local"),
        m.created_at,
        m.updated_at,
        m.last_user_at,
        m.metadata,
    )


@pytest.mark.parametrize(
    ("text", "sessions", "expected"),
    [
        # the terminal-only user: the workspace is visited when it has work
        (ONE_TASK, [terminal()], [("skip", "skip-flag"), ("run", "due")]),
        (TEMPLATE, [terminal()], [("skip", "skip-flag"), ("skip", "empty")]),
        # a terminal idle for longer than stale_after does not wake a checklist
        (ONE_TASK, [terminal(last_user=timedelta(days=3))], [("skip", "skip-flag"), STALE]),
        (ONE_TASK, [terminal(last_user=None)], [("skip", "skip-flag"), STALE]),
        # a chat platform session with the flag keeps the workspace unvisited
        (ONE_TASK, [meta("a", skip=True)], [("skip", "skip-flag")]),
    ],
)
def test_a_fresh_terminal_session_keeps_its_workspace_visited(text, sessions, expected) -> None:
    assert reasons(plan(text, sessions=sessions, name=CHAT_WS)) == expected


def test_a_terminal_is_never_a_fan_out_target() -> None:
    ds = plan(ONE_TASK, sessions=[terminal()], cfg=HeartbeatConfig(target="all"))
    (run,) = [d for d in ds if d.decision == "run"]
    assert run.unit is not None and run.unit.session is None and run.session is None


def test_session_with_no_user_message_is_stale() -> None:
    ds = plan(ONE_TASK, sessions=[meta(last_user=None)], name=CHAT_WS)
    assert reasons(ds) == [("skip", "stale"), ("skip", "stale")]


def test_one_fresh_session_is_enough() -> None:
    ds = plan(ONE_TASK, sessions=[meta("a", last_user=timedelta(days=3)), meta("b")])
    assert reasons(ds) == [("skip", "stale"), ("run", "due")]


def test_missing_file_and_unreadable() -> None:
    assert reasons(plan(None)) == [("skip", "empty")]
    from vikingbot.heartbeat.types import ParseResult

    ws = WorkspaceInput(
        "shared", [meta()], ParseResult(unreadable="not valid UTF-8"), WorkspaceState("shared")
    )
    ds = plan_workspace(
        ws, cfg=HeartbeatConfig(), now=NOW, tz=UTCZ, trigger="scheduled", today="2026-03-10"
    )
    assert reasons(ds) == [("skip", "unreadable")] and ds[0].detail == "not valid UTF-8"


def test_paused_by_user_and_by_budget() -> None:
    assert reasons(
        plan(ONE_TASK, state=WorkspaceState("shared", paused=True, paused_reason="user"))
    ) == [("skip", "paused")]
    assert reasons(
        plan(ONE_TASK, state=WorkspaceState("shared", paused=True, paused_reason="budget"))
    ) == [("skip", "budget")]


def test_budget_used_up_today() -> None:
    cfg = HeartbeatConfig.model_validate({"budget": {"daily_tokens": 1000}})
    spent = WorkspaceState("shared", budget_day="2026-03-10", tokens_today=1000)
    assert reasons(plan(ONE_TASK, state=spent, cfg=cfg)) == [("skip", "budget")]
    yesterday = WorkspaceState("shared", budget_day="2026-03-09", tokens_today=5000)
    assert reasons(plan(ONE_TASK, state=yesterday, cfg=cfg)) == [("run", "due")]


def test_busy_workspace() -> None:
    assert reasons(plan(ONE_TASK, busy=True)) == [("skip", "busy")]


SEEN = {"Check the build": EntryState("shared", "Check the build", NOW - timedelta(days=1))}


def test_checklist_cadence_from_persisted_state() -> None:
    recent = WorkspaceState("shared", last_checklist_at=NOW - timedelta(seconds=300))
    ds = plan(ONE_TASK, state=recent, entries=SEEN)
    assert reasons(ds) == [("skip", "not-due")]
    assert ds[0].next_due == NOW + timedelta(seconds=300)
    # a manual cycle ignores the cadence
    assert reasons(plan(ONE_TASK, state=recent, trigger="manual", entries=SEEN)) == [
        ("run", "manual")
    ]
    # a tick a few seconds early still counts
    almost = WorkspaceState("shared", last_checklist_at=NOW - timedelta(seconds=595))
    assert reasons(plan(ONE_TASK, state=almost, entries=SEEN)) == [("run", "due")]
    # an entry never seen before (just saved) runs the checklist at once
    assert reasons(plan(ONE_TASK, state=recent)) == [("run", "due")]


def test_target_all_fans_out_per_session() -> None:
    cfg = HeartbeatConfig(target="all")
    ds = plan(ONE_TASK, sessions=[meta("a"), meta("b")], cfg=cfg)
    assert reasons(ds) == [("run", "due"), ("run", "due")]
    assert {d.session for d in ds} == {"telegram:default:a", "telegram:default:b"}


def test_per_task_mode_one_turn_per_entry() -> None:
    text = ONE_TASK.replace("- Check the build\n", "- Check the build\n- Water the plants\n")
    ds = plan(text, cfg=HeartbeatConfig(mode="per-task"))
    assert [(d.decision, d.entry) for d in ds] == [
        ("run", "Check the build"),
        ("run", "Water the plants"),
    ]


def test_per_task_pending_while_running() -> None:
    st = {
        "Check the build": EntryState(
            "shared",
            "Check the build",
            NOW - timedelta(hours=1),
            running_since=NOW - timedelta(minutes=5),
        )
    }
    ds = plan(ONE_TASK, cfg=HeartbeatConfig(mode="per-task"), entries=st)
    assert reasons(ds) == [("skip", "pending")]


def test_stale_running_mark_does_not_block_forever() -> None:
    st = {
        "Check the build": EntryState(
            "shared",
            "Check the build",
            NOW - timedelta(days=1),
            running_since=NOW - timedelta(hours=2),
        )
    }
    ds = plan(ONE_TASK, cfg=HeartbeatConfig(mode="per-task"), entries=st)
    assert reasons(ds) == [("run", "due")]


SCHED = TEMPLATE.replace(
    "below this line -->\n", "below this line -->\n- every: 30m title: Builds task: Check CI\n"
)


def test_new_scheduled_entry_waits_one_interval() -> None:
    ds = plan(SCHED)
    assert reasons(ds) == [("skip", "not-due")]
    assert ds[0].next_due == NOW + timedelta(minutes=30)


@pytest.mark.parametrize(
    ("last_fired_ago", "expected"),
    [
        (timedelta(minutes=10), "not-due"),
        (timedelta(minutes=30), "due"),
        (timedelta(days=3), "due"),
    ],
)
def test_scheduled_entry_due(last_fired_ago: timedelta, expected: str) -> None:
    st = {
        "Builds": EntryState(
            "shared", "Builds", NOW - timedelta(days=5), last_fired=NOW - last_fired_ago
        )
    }
    assert reasons(plan(SCHED, entries=st))[0][1] == expected


def test_continuation_runs_next_tick_even_if_not_due() -> None:
    st = {
        "Builds": EntryState(
            "shared",
            "Builds",
            NOW - timedelta(days=5),
            last_fired=NOW - timedelta(minutes=10),
            continue_next=True,
        )
    }
    ds = plan(SCHED, entries=st)
    assert reasons(ds) == [("run", "continuation")]
    assert ds[0].unit is not None and ds[0].unit.continuation


def test_parked_entry_is_skipped_until_edited() -> None:
    parked = SCHED.replace("task: Check CI\n", "task: Check CI <!-- parked: failed 3 times -->\n")
    entry = parse_heartbeat(parked).scheduled[0]
    st = {
        "Builds": EntryState(
            "shared",
            "Builds",
            NOW - timedelta(days=5),
            parked_reason="x",
            parked_text_hash=text_hash(entry.text),
        )
    }
    assert reasons(plan(parked, entries=st)) == [("skip", "parked")]
    edited = parked.replace("Check CI", "Check CI and the nightly job")
    assert reasons(plan(edited, entries=st))[0] != ("skip", "parked")


def test_malformed_entry_does_not_stop_the_others() -> None:
    text = SCHED.replace(
        "- every: 30m", "- every: 30m daily: 09:00 title: Broken task: x\n- every: 30m"
    )
    parsed = parse_heartbeat(text)
    assert len(parsed.errors) == 1 and parsed.errors[0].line == 6
    st = {
        "Builds": EntryState(
            "shared", "Builds", NOW - timedelta(days=5), last_fired=NOW - timedelta(hours=1)
        )
    }
    assert reasons(plan(text, entries=st)) == [("run", "due")]


DAILY = TEMPLATE.replace(
    "below this line -->\n", "below this line -->\n- daily: 12:01 title: Digest task: Summarise\n"
)


def daily_state(last_fired: datetime | None) -> dict[str, EntryState]:
    return {
        "Digest": EntryState("shared", "Digest", NOW - timedelta(days=5), last_fired=last_fired)
    }


def test_daily_slot_never_fires_before_its_time() -> None:
    # 12:00:40, the slot is 12:01: not due, however often a cycle (or run-now) looks
    early = NOW + timedelta(seconds=40)
    for trigger in ("scheduled", "manual", "manual", "manual"):
        ws = WorkspaceInput(
            "shared",
            [meta()],
            parse_heartbeat(DAILY),
            WorkspaceState("shared"),
            entries=daily_state(datetime(2026, 3, 9, 12, 1, tzinfo=UTC)),
        )
        ds = plan_workspace(
            ws, cfg=HeartbeatConfig(), now=early, tz=UTCZ, trigger=trigger, today="2026-03-10"
        )
        assert reasons(ds) == [("skip", "not-due")]
        assert ds[0].next_due == datetime(2026, 3, 10, 12, 1, tzinfo=UTC)


def test_daily_slot_fires_once_and_the_unit_carries_the_slot() -> None:
    after = NOW + timedelta(minutes=5)
    ws = WorkspaceInput(
        "shared",
        [meta()],
        parse_heartbeat(DAILY),
        WorkspaceState("shared"),
        entries=daily_state(NOW - timedelta(days=3)),  # missed days: one run, not a burst
    )
    (d,) = plan_workspace(
        ws, cfg=HeartbeatConfig(), now=after, tz=UTCZ, trigger="scheduled", today="2026-03-10"
    )
    assert d.decision == "run" and d.unit is not None
    slot = datetime(2026, 3, 10, 12, 1, tzinfo=UTC)
    assert d.unit.slot == slot
    # with the slot stored as last_fired, the same slot is not due again
    ws.entries = daily_state(slot)
    (again,) = plan_workspace(
        ws, cfg=HeartbeatConfig(), now=after, tz=UTCZ, trigger="scheduled", today="2026-03-10"
    )
    assert (again.reason, again.next_due) == ("not-due", slot + timedelta(days=1))


def test_an_impossible_interval_is_an_invalid_skip_not_a_crash() -> None:
    # the parser caps every: (366d); the planner is total on whatever it is given
    from dataclasses import replace

    from vikingbot.heartbeat.types import ParseResult, Schedule

    (e,) = parse_heartbeat(SCHED).scheduled
    huge = replace(e, schedule=Schedule("every", every_s=9999999 * 86400.0))
    ws = WorkspaceInput(
        "shared",
        [meta()],
        ParseResult(entries=(huge,)),
        WorkspaceState("shared"),
        entries={"Builds": EntryState("shared", "Builds", NOW - timedelta(days=5))},
    )
    (d,) = plan_workspace(
        ws, cfg=HeartbeatConfig(), now=NOW, tz=UTCZ, trigger="scheduled", today="2026-03-10"
    )
    assert (d.decision, d.reason) == ("skip", "invalid")
    assert d.detail is not None and "past the year 9999" in d.detail


def test_provider_down_turns_runs_into_waits() -> None:
    parsed = parse_heartbeat(ONE_TASK)
    ws = WorkspaceInput("shared", [meta()], parsed, WorkspaceState("shared"))
    ds = plan_workspace(
        ws,
        cfg=HeartbeatConfig(),
        now=NOW,
        tz=UTCZ,
        trigger="scheduled",
        today="2026-03-10",
        provider_down="provider down since 11:00",
    )
    assert reasons(ds) == [("skip", "provider-down")]
    assert ds[0].detail == "provider down since 11:00"


def test_only_if_without_its_checker_is_a_checker_missing_skip() -> None:
    """Issue 16: `only-if: github:prs` with no github checker ran the model every time."""
    entry = "- every: 30m only-if: github:prs title: Reviews task: Summarise\n"
    text = TEMPLATE.replace("below this line -->\n", "below this line -->\n" + entry)
    (d,) = plan(text)
    assert (d.decision, d.reason, d.entry, d.unit) == ("skip", "checker-missing", "Reviews", None)
    assert d.detail == (
        "only-if: github is not configured (checkers: none): add bot.heartbeat.checkers.github "
        "(docs/checkers.md), or remove only-if:"
    )
    cfg = HeartbeatConfig.model_validate({"checkers": {"github": {"kind": "github"}}})
    assert reasons(plan(text, cfg=cfg)) == [("skip", "not-due")]  # first seen: one interval
    (d,) = plan(text.replace("github:prs", "gihub:prs"), cfg=cfg)
    assert d.reason == "checker-missing"
    assert d.detail is not None and "(checkers: github): did you mean only-if: github? " in d.detail
