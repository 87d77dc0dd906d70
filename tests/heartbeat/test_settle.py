"""settle(): every rule of spec sections 3 to 5 as a table, on fixed datetimes, no I/O."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from vikingbot.config.schema import HeartbeatConfig
from vikingbot.heartbeat.outcome import (
    CheckFacts,
    Ctx,
    TurnFacts,
    fresh_state,
    needs_reply_delivery,
    reply_kind,
    settle,
    settle_check,
    settle_missed,
    unpark_moves,
)
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.rewrite import Complete, Delete, Park, Unpark
from vikingbot.heartbeat.types import Entry, EntryState, Unit, text_hash

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
SLOT = datetime(2026, 3, 10, 11, 58, tzinfo=UTC)
EARLIER = NOW - timedelta(hours=1)


def entry(line: str) -> Entry:
    parsed = parse_heartbeat(f"## Active Tasks\n{line}\n")
    (e,) = parsed.active
    return e


TASK = entry("- Water the plants")
SCHED = entry("- daily: 11:58 title: Digest task: Summarise the news")
GUARDED = entry("- every: 30m only-if: disk title: Disk task: Check /var")


def ctx(trigger: str = "scheduled", **cfg: object) -> Ctx:
    return Ctx(
        HeartbeatConfig.model_validate(cfg),
        NOW,
        date(2026, 3, 10),
        trigger,  # type: ignore[arg-type]
        "shared",
    )


def state(e: Entry, **kw: object) -> EntryState:
    base = EntryState("shared", e.key, first_seen=NOW - timedelta(days=2), last_fired=EARLIER)
    return replace(base, running_since=NOW, **kw)  # type: ignore[arg-type]


def reply_facts(text: str | None, *sends: str, **kw: object) -> TurnFacts:
    return TurnFacts("reply", reply=text, sends=sends, model_calls=1, **kw)  # type: ignore[arg-type]


TASK_UNIT = Unit("task", TASK)
SCHED_UNIT = Unit("scheduled", SCHED, slot=SLOT)
CHECKLIST = Unit("checklist")


# ---------------------------------------------------------------- replies (section 3)


@pytest.mark.parametrize(
    ("unit", "facts", "outcome", "moves"),
    [
        # per-task: a no-op or a result completes the entry (moved, dated)
        (TASK_UNIT, reply_facts("HEARTBEAT_OK"), "completed", [Complete]),
        (TASK_UNIT, reply_facts(None), "completed", [Complete]),
        (TASK_UNIT, reply_facts("Watered.", "delivered"), "delivered", [Complete]),
        (TASK_UNIT, reply_facts("Watered.", "inboxed"), "inboxed", [Complete]),
        (TASK_UNIT, reply_facts("Watered.", "silent"), "completed", [Complete]),
        (TASK_UNIT, reply_facts("Watered.", "refused"), "refused", [Complete]),
        # HEARTBEAT_KEEP anywhere, any case: the entry stays, nothing moves
        (TASK_UNIT, reply_facts("half done heartbeat_keep"), "kept", []),
        # a per-entry turn cut at the tool-call limit is unfinished work
        (TASK_UNIT, reply_facts("partial", turn_limit=True), "kept", []),
        # scheduled entries recur: never moved to Completed
        (SCHED_UNIT, reply_facts("HEARTBEAT_OK"), "noop", []),
        (SCHED_UNIT, reply_facts("News.", "delivered"), "delivered", []),
        (SCHED_UNIT, reply_facts("News.", "failed"), "failed", []),
        # the checklist turn: no entry state, only the outcome
        (CHECKLIST, reply_facts("HEARTBEAT_OK"), "noop", []),
        (CHECKLIST, reply_facts("Done", "delivered"), "delivered", []),
        (CHECKLIST, reply_facts("still going HEARTBEAT_KEEP"), "kept", []),
        (CHECKLIST, reply_facts("partial", turn_limit=True), "completed", []),
    ],
)
def test_reply_outcomes(unit: Unit, facts: TurnFacts, outcome: str, moves: list[type]) -> None:
    st = state(unit.entry) if unit.entry else None
    s = settle(unit, facts, st, ctx())
    assert s.outcome == outcome and s.row.outcome == outcome
    assert [type(m) for m in s.moves] == moves
    if s.entry is not None:
        assert s.entry.running_since is None and s.entry.retries == 0


def test_completed_entry_carries_its_date_and_the_raw_lines_it_was_read_as() -> None:
    s = settle(TASK_UNIT, reply_facts("HEARTBEAT_OK"), state(TASK), ctx())
    assert s.moves == (Complete("Water the plants", date(2026, 3, 10), expect=TASK.raw),)
    s = settle(TASK_UNIT, reply_facts("ok"), state(TASK), ctx(on_complete="delete"))
    assert s.moves == (Delete("Water the plants", expect=TASK.raw),)


def test_message_tool_then_noop_counts_as_delivered() -> None:
    s = settle(SCHED_UNIT, reply_facts("HEARTBEAT_OK", "delivered"), state(SCHED), ctx())
    assert s.outcome == "delivered"


@pytest.mark.parametrize(
    ("text", "sends", "deliver"),
    [
        ("Two invoices arrived.", (), True),
        ("HEARTBEAT_OK", (), False),
        ("Two invoices arrived.", ("delivered",), False),  # the message tool sent it already
        ("<b>HEARTBEAT_KEEP</b>", (), False),
    ],
)
def test_plain_reply_is_delivered_only_when_nothing_was_sent(
    text: str, sends: tuple[str, ...], deliver: bool
) -> None:
    facts = reply_facts(text, *sends)
    kind = reply_kind(text, turn_limit=False, unit=SCHED_UNIT, ack_max_chars=300)
    assert needs_reply_delivery(facts, kind) is deliver


# ---------------------------------------------------------------- failures and parking


@pytest.mark.parametrize("ended", ["failed", "timeout"])
def test_failure_charges_a_retry_and_clears_the_signature(ended: str) -> None:
    facts = TurnFacts(ended, error="boom")  # type: ignore[arg-type]
    s = settle(SCHED_UNIT, facts, state(SCHED, signature="abc", retries=0), ctx())
    assert s.outcome == ended and s.entry is not None
    assert (s.entry.retries, s.entry.signature, s.moves, s.notices) == (1, None, (), ())
    assert s.entry.last_fired == SLOT  # the slot is used: it does not fire again


def test_third_failure_parks_and_tells_the_owner_once() -> None:
    s = settle(TASK_UNIT, TurnFacts("failed", error="boom"), state(TASK, retries=2), ctx())
    assert s.outcome == "parked" and s.entry is not None
    assert s.moves == (Park("Water the plants", "failed 3 times: boom"),)
    assert s.entry.parked_text_hash == text_hash(TASK.text)
    (notice,) = s.notices
    assert "parked after 3 failed runs (boom)" in notice.text
    assert "vikingbot heartbeat unpark" in notice.text
    # keyed by the entry's content, never by a line number or a time
    again = settle(TASK_UNIT, TurnFacts("failed", error="other"), state(TASK, retries=2), ctx())
    assert again.notices[0].key == notice.key


def test_checklist_failure_is_told_and_resolved_by_the_next_success() -> None:
    failed = settle(CHECKLIST, TurnFacts("failed", error="tool crashed"), None, ctx())
    assert failed.outcome == "failed"
    (notice,) = failed.notices
    assert "checklist in workspace shared failed: tool crashed" in notice.text
    ok = settle(CHECKLIST, reply_facts("HEARTBEAT_OK"), None, ctx())
    assert ok.resolved == (notice.key,)


def test_continuations_park_after_the_limit() -> None:
    keep = reply_facts("more to do HEARTBEAT_KEEP")
    s1 = settle(SCHED_UNIT, keep, state(SCHED), ctx())
    assert s1.outcome == "kept" and s1.entry is not None
    assert (s1.entry.continuations, s1.entry.continue_next) == (1, True)
    s3 = settle(SCHED_UNIT, keep, state(SCHED, continuations=2), ctx())
    assert s3.outcome == "parked" and s3.entry is not None
    assert s3.entry.continue_next is False
    assert s3.moves == (Park("Digest", "asked to continue 3 times in a row"),)
    # a finished run resets the count
    done = settle(SCHED_UNIT, reply_facts("HEARTBEAT_OK"), state(SCHED, continuations=2), ctx())
    assert done.entry is not None and done.entry.continuations == 0


# ---------------------------------------------------------------- provider outages (defect 6)


@pytest.mark.parametrize("unit", [TASK_UNIT, SCHED_UNIT, CHECKLIST])
def test_provider_down_charges_nothing_parks_nothing(unit: Unit) -> None:
    st = state(unit.entry, retries=2, signature="abc") if unit.entry else None
    s = settle(unit, TurnFacts("provider-down", error="503"), st, ctx())
    assert s.outcome == "provider-down" and s.moves == () and s.notices == ()
    if s.entry is not None:
        assert s.entry.retries == 2  # not charged, even on the edge of parking
        assert s.entry.last_fired == EARLIER  # the slot stays due: it runs when the model is back
        assert s.entry.signature is None and s.entry.running_since is None


# ---------------------------------------------------------------- slots and cadence (defect 1)


def test_scheduled_run_stores_its_slot_not_the_tick_time() -> None:
    s = settle(SCHED_UNIT, reply_facts("HEARTBEAT_OK"), state(SCHED), ctx())
    assert s.entry is not None and s.entry.last_fired == SLOT


def test_manual_run_of_a_task_does_not_move_its_cadence() -> None:
    s = settle(TASK_UNIT, reply_facts("keep HEARTBEAT_KEEP"), state(TASK), ctx("manual"))
    assert s.entry is not None and s.entry.last_fired == EARLIER
    s = settle(TASK_UNIT, reply_facts("keep HEARTBEAT_KEEP"), state(TASK), ctx())
    assert s.entry is not None and s.entry.last_fired == NOW


# ---------------------------------------------------------------- checkers (section 5, defect 2)


GUARD_UNIT = Unit("scheduled", GUARDED, slot=SLOT)


@pytest.mark.parametrize(
    ("stored", "check", "skip", "signature"),
    [
        (None, CheckFacts(True, "s1"), None, "s1"),  # news: stored before the run
        ("s1", CheckFacts(True, "s1"), "unchanged", "s1"),
        ("s1", CheckFacts(True, "s2"), None, "s2"),
        ("s1", CheckFacts(False), "no-work", None),  # no work releases the signature
        ("s1", CheckFacts(True, None, error="timeout"), None, "s1"),  # fail-open
    ],
)
def test_check_rules(
    stored: str | None, check: CheckFacts, skip: str | None, signature: str | None
) -> None:
    st, why = settle_check(GUARD_UNIT, state(GUARDED, signature=stored), check, ctx())
    assert (why, st.signature) == (skip, signature)
    if skip is not None:
        assert st.last_fired == SLOT  # a skipped slot counts as fired


def test_recurring_news_after_a_no_work_check_wakes_the_agent() -> None:
    st = state(GUARDED)
    st, why = settle_check(GUARD_UNIT, st, CheckFacts(True, "91%"), ctx())
    assert why is None
    st, why = settle_check(GUARD_UNIT, st, CheckFacts(False), ctx())
    assert why == "no-work"
    st, why = settle_check(GUARD_UNIT, st, CheckFacts(True, "91%"), ctx())
    assert why is None  # before the fix: "unchanged", and the agent never heard of it


@pytest.mark.parametrize(
    ("wrote", "tools", "sends", "moves_signature", "recheck"),
    [
        (False, (), (), None, False),  # a read-only run leaves the watermark
        (True, ("write_file",), (), None, True),
        (False, (), ("delivered",), None, True),  # a delivered message is an own write
        (True, ("write_file",), (), ("exec",), False),  # the checker names what moves it
        (True, ("exec",), (), ("exec",), True),
    ],
)
def test_own_write_rechecks_the_signature(
    wrote: bool,
    tools: tuple[str, ...],
    sends: tuple[str, ...],
    moves_signature: tuple[str, ...] | None,
    recheck: bool,
) -> None:
    facts = reply_facts("HEARTBEAT_OK", *sends, wrote=wrote, tools_run=tools)
    c = replace(ctx(), moves_signature=moves_signature)
    assert settle(GUARD_UNIT, facts, state(GUARDED), c).recheck is recheck


def test_edited_parked_entry_starts_afresh() -> None:
    parked = entry("- Water the plants <!-- parked: failed 3 times -->")
    old = state(parked, retries=3, parked_reason="failed 3 times", parked_text_hash="x")
    fresh = fresh_state(parked, old, ctx())
    assert (fresh.retries, fresh.parked_reason, fresh.running_since) == (0, None, NOW)
    assert unpark_moves(parked, old) == (Unpark("Water the plants"),)
    assert unpark_moves(TASK, old) == ()


# ---------------------------------------------------------------- a slot found late


GRACE = timedelta(hours=3)
EVERY = entry("- every: 30m title: Mail task: Check the mail")


@pytest.mark.parametrize(
    ("unit", "trigger", "skip"),
    [
        (Unit("scheduled", SCHED, slot=NOW - timedelta(hours=3)), "scheduled", None),
        (Unit("scheduled", SCHED, slot=NOW - timedelta(hours=3, minutes=1)), "scheduled", "missed"),
        # run-now runs it anyway; a continuation is not a slot
        (Unit("scheduled", SCHED, slot=NOW - timedelta(hours=9)), "manual", None),
        (Unit("scheduled", SCHED, slot=None, continuation=True), "scheduled", None),
        # every: is due from its last run, never "late"
        (Unit("scheduled", EVERY, slot=NOW - timedelta(hours=9)), "scheduled", None),
        (TASK_UNIT, "scheduled", None),
    ],
)
def test_a_clock_slot_found_too_late_is_missed(unit: Unit, trigger: str, skip: str | None) -> None:
    assert unit.entry is not None
    before = state(unit.entry)
    st, why = settle_missed(unit, before, ctx(trigger), GRACE)
    assert why == skip
    if skip == "missed":
        assert st.last_fired == unit.slot  # used: the next tick waits for the next slot
    else:
        assert st == before
