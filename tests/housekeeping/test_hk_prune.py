"""Retention: only what is older than history_max_days goes; failures are counted."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import sqlalchemy as sa

from vikingbot.housekeeping.prune import cut_point
from vikingbot.housekeeping.search import search
from vikingbot.store.tables import heartbeat_runs, history_docs

if TYPE_CHECKING:
    from conftest import Housekeeping

TG = "telegram:default:42"


def _ledger_row(hk: Housekeeping, days_ago: float, cycle: str) -> dict[str, object]:
    return {
        "cycle_id": cycle,
        "at": hk.now - timedelta(days=days_ago),
        "workspace": "shared",
        "trigger": "scheduled",
        "decision": "skip",
        "reason": "empty",
    }


def _count(hk: Housekeeping, table: sa.Table) -> int:
    with hk.store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() or 0)


async def test_prune_removes_only_old_rows(hk_db: Housekeeping) -> None:
    hk = hk_db
    with hk.store.engine.begin() as conn:
        conn.execute(
            sa.insert(heartbeat_runs),
            [_ledger_row(hk, 45, "old"), _ledger_row(hk, 31, "old2"), _ledger_row(hk, 29, "new")],
        )
    hk.clock.set(hk.now - timedelta(days=40))
    hk.store.audit("heartbeat", "tool.deny", "exec", "denied", "old")
    hk.clock.set(hk.now - timedelta(days=1))
    hk.store.audit("heartbeat", "tool.deny", "exec", "denied", "recent")
    hk.clock.set(hk.now)

    stats = await hk.service.prune_now()
    assert stats is not None
    assert stats.rows == {"heartbeat_runs": 2, "audit_events": 1, "history_docs": 0}
    with hk.store.engine.connect() as conn:
        cycles = conn.execute(sa.select(heartbeat_runs.c.cycle_id)).scalars().all()
    assert cycles == ["new"]
    assert [e["reason"] for e in hk.store.audit_events()] == ["recent"]
    assert hk.service.metrics["prune_rows_deleted_total"] == 3
    assert hk.service.metrics["prune_failures_total"] == 0


async def test_prune_trims_old_lines_from_session_files(hk_db: Housekeeping) -> None:
    hk = hk_db
    m = hk.msg
    call = [{"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]
    hk.sessions.append(TG, m("user", "ancient question about llamas", 60))
    hk.sessions.append(TG, m("assistant", "", 31, tool_calls=call))
    hk.sessions.append(TG, m("user", "new question about alpacas", 2))
    hk.sessions.append(TG, m("assistant", "alpacas answer", 2))
    # a tool result just after the cut loses its call: it goes too
    path = hk.sessions.path_for(TG)
    lines = path.read_bytes().split(b"\n")
    tool_line = (
        b'{"role": "tool", "content": "llama facts", "timestamp": "'
        + (hk.now - timedelta(days=2)).isoformat().encode()
        + b'", "tool_call_id": "c1"}'
    )
    path.write_bytes(b"\n".join([*lines[:3], tool_line, *lines[3:]]))
    await hk.service.index_now()
    assert len(search(hk.store, "llamas")) == 1
    head_before = path.read_bytes().split(b"\n")[0]

    stats = await hk.service.prune_now()
    assert stats is not None and stats.lines_removed == 3 and stats.sessions_pruned == 1
    assert [(x.role, x.content) for x in hk.sessions.read_messages(TG)] == [
        ("user", "new question about alpacas"),
        ("assistant", "alpacas answer"),
    ]
    assert path.read_bytes().split(b"\n")[0] == head_before  # metadata untouched
    assert search(hk.store, "llamas") == []  # gone from the index too
    assert [h.snippet for h in search(hk.store, "alpacas")] != []
    assert _count(hk, history_docs) == 2


def test_cut_point_stops_at_an_unreadable_line(hk: Housekeeping) -> None:
    old = (hk.now - timedelta(days=40)).isoformat().encode()
    good = b'{"role": "user", "content": "x", "timestamp": "' + old + b'"}'
    assert cut_point([good, good], hk.now - timedelta(days=30)) == 2
    assert cut_point([good, b"{broken", good], hk.now - timedelta(days=30)) == 1


async def test_a_failed_prune_is_counted_and_the_rest_goes_on(hk: Housekeeping) -> None:
    hk.sessions.append(TG, hk.msg("user", "old words", 60))
    hk.sessions.append("slack:T1:C1", hk.msg("user", "also old", 60))
    bad = hk.sessions.path_for("slack:T1:C1")
    bad.write_bytes(b"not json\n" + bad.read_bytes().split(b"\n", 1)[1])
    stats = await hk.service.prune_now()
    assert stats is not None and len(stats.errors) == 1 and "slack" in stats.errors[0]
    assert hk.sessions.read_messages(TG) == []  # the good file was still pruned
    assert hk.service.metrics["prune_failures_total"] == 1
    assert hk.service.metrics["prune_runs_total"] == 1


async def test_a_database_failure_is_counted_and_files_are_still_pruned(
    hk_db: Housekeeping,
) -> None:
    hk = hk_db
    hk.sessions.append(TG, hk.msg("user", "old words", 60))
    with hk.store.engine.begin() as conn:
        conn.execute(sa.insert(heartbeat_runs), [_ledger_row(hk, 45, "old")])
        conn.execute(sa.text("DROP TABLE audit_events"))  # the database step will fail
    stats = await hk.service.prune_now()
    assert stats is not None and "state database" in stats.errors[0]
    assert hk.service.metrics["prune_failures_total"] == 1
    assert _count(hk, heartbeat_runs) == 1  # rolled back as a whole, not half-done
    assert hk.sessions.read_messages(TG) == []


async def test_prune_trims_heartbeat_sessions_kept_apart(hk_db: Housekeeping) -> None:
    from vikingbot.session.types import SessionKey

    hk = hk_db
    key = SessionKey("heartbeat", "hb", "shared")
    hk.sessions.append(key, hk.msg("assistant", "HEARTBEAT_OK long ago", 60))
    hk.sessions.append(key, hk.msg("assistant", "HEARTBEAT_OK today", 0))
    assert hk.sessions.path_for(key).parent == hk.sessions.system_dir
    stats = await hk.service.prune_now()
    assert stats is not None and stats.sessions_pruned == 1
    assert [x.content for x in hk.sessions.read_messages(key)] == ["HEARTBEAT_OK today"]
