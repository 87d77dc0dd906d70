"""A workspace's state row when several gateways finish its units at once (issue 14).

Each gateway holds a copy of the row read at the start of its cycle. Its units'
writes say what they change and merge with the stored row (``state.WorkspaceChange``):
nobody's tokens, cost or prompts are lost, and the cadence and the latest run only
move forward, whichever write lands last. On SQLite and PostgreSQL, with two
heartbeats ("gateways", each its own engine) and with threads hammering one row.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.databases import SharedDb
from tests.support.databases import shared_db as make_shared_db
from tests.support.waits import until
from vikingbot.agent.types import TurnResult
from vikingbot.clock import SystemClock
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.delivery.service import Outgoing
from vikingbot.gateway import compose
from vikingbot.gateway.compose import Home, build_home
from vikingbot.heartbeat.service import HeartbeatService
from vikingbot.heartbeat.state import HeartbeatState, WorkspaceChange
from vikingbot.session.types import Message, SessionKey

TEMPLATE = (
    "# Heartbeat Tasks\n\n## Active Tasks\n\n<!-- Add your periodic tasks below this line -->\n\n"
    "- Report on the build\n- Report on the disks\n\n"
    "## Completed\n\n<!-- Move completed tasks here or delete them -->\n"
)


@dataclass
class Agent:
    """Answers a heartbeat turn once ``gate`` opens, spending ``tokens`` and ``cost``."""

    name: str
    tokens: int
    cost: float
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    turns: int = 0

    async def run_turn(self, prompt: str, session_key: Any, metadata: Any = None, **_: Any) -> Any:
        self.turns += 1
        await self.gate.wait()
        return TurnResult(
            text=f"Done by {self.name}.",
            model_calls=1,
            tokens_in=self.tokens,
            tokens_out=1,
            cost_usd=self.cost,
        )


def _home(home: Path) -> str:
    """One per-session workspace with two due tasks; its name."""
    from vikingbot.session.store import SessionStore
    from vikingbot.workspace.manager import checked_name

    key = SessionKey("telegram", "default", "ann")
    sessions = SessionStore(home / "sessions")
    sessions.get_or_create(key)
    sessions.append(key, Message(role="user", content="hi", timestamp=datetime.now(UTC)))
    name = checked_name(key, "per-session")
    folder = home / "workspace" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "HEARTBEAT.md").write_text(TEMPLATE)
    return name


def _gateway(home: Path, db: SharedDb, owner: str, agent: Agent) -> tuple[Home, HeartbeatService]:
    url = db.config_url
    paths = Paths(home=home, config_file=home / "config.json", data_dir=home, database_url=url)
    config = Config.model_validate(
        {
            "bot": {
                "owner": "telegram:42",
                "sandbox": {"mode": "per-session"},
                "heartbeat": {"timezone": "UTC", "mode": "per-task", "max_concurrency": 1},
                "channels": {"telegram": {"enabled": True, "token": "t", "allow_from": ["42"]}},
            }
        }
    )
    rt = build_home(config, paths, clock=SystemClock(), environ={})

    async def sent(item: Outgoing) -> bool:
        return True

    rt.delivery.connect(sent)
    return rt, compose.heartbeat(rt, agent=agent, owner=owner)  # type: ignore[arg-type]


def _stored(db: SharedDb, name: str) -> Any:
    store = db.open()
    try:
        return HeartbeatState(store).workspace(name)
    finally:
        store.close()


@pytest.mark.parametrize("order", ["together", "older-last"])
async def test_two_gateways_finishing_one_workspaces_units_lose_nothing(
    shared_db: SharedDb, tmp_path: Path, order: str
) -> None:
    """A runs the first task, B (its cycle started later) the second; both read the
    row before either wrote. Their commits land together, or A's (older) one last:
    the row holds both spends and prompts, and B's later run as the last one."""
    name = _home(tmp_path)
    shared_db.open().close()  # the schema, migrated
    a, b = Agent("A", tokens=1000, cost=0.25), Agent("B", tokens=20, cost=0.5)
    rt_a, hb_a = _gateway(tmp_path, shared_db, "gw-a", a)
    rt_b, hb_b = _gateway(tmp_path, shared_db, "gw-b", b)
    try:
        first = asyncio.create_task(hb_a.run_cycle())
        await until(lambda: a.turns == 1, "A's turn")
        second = asyncio.create_task(hb_b.run_cycle())  # the first task is A's: B runs the other
        await until(lambda: b.turns == 1, "B's turn")
        if order == "together":
            a.gate.set()
            b.gate.set()
            report_a, report_b = await asyncio.wait_for(asyncio.gather(first, second), 30)
        else:
            b.gate.set()
            report_b = await asyncio.wait_for(second, 30)
            a.gate.set()
            report_a = await asyncio.wait_for(first, 30)
        ran = [
            (r.entry, r.outcome)
            for report in (report_a, report_b)
            for r in report.rows
            if r.decision == "run"
        ]
        assert len(ran) == 2 and a.turns == b.turns == 1
        assert report_a.started_at < report_b.started_at
        row = _stored(shared_db, name)
        assert row.tokens_today == 1000 + 1 + 20 + 1
        assert row.cost_today == pytest.approx(0.75)
        assert row.hb_session_prompts == 2
        assert row.last_run_at == report_b.started_at  # the later run, whoever wrote last
        assert row.last_decision == "run" and row.last_decision_at == report_b.started_at
        # each gateway's copy is the stored row after its own write
        assert hb_b.state.workspace(name).tokens_today >= 21
    finally:
        a.gate.set()
        b.gate.set()
        for rt, hb in ((rt_a, hb_a), (rt_b, hb_b)):
            hb.stop()
            await hb.drain(5)
            await rt.aclose()


def test_writers_racing_on_one_row_add_up_and_keep_the_latest(shared_db: SharedDb) -> None:
    """Two threads, each with its own engine and a copy read before either wrote, each
    commit 40 changes of one workspace at once (ledger rows included, as a unit's
    commit does). Every token, cost and prompt counts; the newest times win."""
    stores = [shared_db.open() for _ in range(2)]
    states = [HeartbeatState(s) for s in stores]
    t0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
    for state in states:
        assert state.workspace("w").tokens_today == 0  # each holds its copy now
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []
    n = 40

    def writer(k: int) -> None:
        try:
            barrier.wait()
            for i in range(n):
                at = t0 + timedelta(seconds=2 * i + k)  # A even seconds, B odd ones
                change = WorkspaceChange(
                    "w",
                    day="2026-03-10",
                    tokens=1 + k,
                    cost=0.5,
                    prompts=1,
                    checklist_at=at,
                    decision="run",
                    reason=f"due-{k}",
                    decided_at=at,
                    outcome=f"ok-{k}",
                    ran_at=at,
                )
                states[k].finish([([], change)])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for store in stores:
        store.close()
    assert errors == []
    row = _stored(shared_db, "w")
    last = t0 + timedelta(seconds=2 * (n - 1) + 1)  # B's last change is the newest
    assert (row.tokens_today, row.cost_today, row.hb_session_prompts) == (n * 1 + n * 2, n, 2 * n)
    assert row.last_checklist_at == last and row.last_run_at == last
    assert (row.last_decision, row.last_reason, row.last_outcome) == ("run", "due-1", "ok-1")


def test_a_day_older_than_the_stored_one_adds_nothing_and_a_newer_day_starts_again(
    shared_db: SharedDb,
) -> None:
    store = shared_db.open()
    try:
        state = HeartbeatState(store)
        state.apply([WorkspaceChange("w", day="2026-03-10", tokens=50, cost=1.0)])
        late = state.apply([WorkspaceChange("w", day="2026-03-09", tokens=7, cost=2.0)])
        assert (late["w"].state.budget_day, late["w"].state.tokens_today) == ("2026-03-10", 50)
        new = state.apply([WorkspaceChange("w", day="2026-03-11", tokens=3, cost=0.5)])
        got = new["w"].state
        assert (got.budget_day, got.tokens_today, got.cost_today) == ("2026-03-11", 3, 0.5)
    finally:
        store.close()


def test_a_budget_stop_is_decided_on_the_row_as_written_and_made_once(
    shared_db: SharedDb,
) -> None:
    """Two gateways' copies each say 60 of a 100-token budget is left unspent: the
    second write sees the first one's spend, and only it pauses (and would tell)."""
    stores = [shared_db.open() for _ in range(2)]
    try:
        a, b = (HeartbeatState(s) for s in stores)
        at = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)

        def spend(state: HeartbeatState, tokens: int) -> Any:
            change = WorkspaceChange(
                "w",
                day="2026-03-10",
                tokens=tokens,
                paused_at=at,
                over_budget=lambda ws: ws.tokens_today >= 100,
            )
            return state.apply([change])["w"]

        assert not spend(a, 60).paused
        second = spend(b, 60)
        assert second.paused and second.state.paused_reason == "budget"
        assert not spend(a, 1).paused  # already paused: not again
        b.pause("w", "user", at)  # a user's pause replaces the reason
        assert b.workspace("w").paused_reason == "user"
    finally:
        for store in stores:
            store.close()


def test_changes_that_cannot_be_merged_are_refused() -> None:
    with pytest.raises(ValueError, match="the day they belong to"):
        WorkspaceChange("w", tokens=5)
    with pytest.raises(ValueError, match="only ever added"):
        WorkspaceChange("w", day="2026-03-10", tokens=-5)
    with pytest.raises(ValueError, match="decision needs its time"):
        WorkspaceChange("w", decision="run")
    with pytest.raises(ValueError, match="needs its time"):
        WorkspaceChange("w", over_budget=lambda ws: True)
    with pytest.raises(ValueError, match="workspace's name"):
        WorkspaceChange("")


@pytest.fixture
def pg_db(pg_url: str, tmp_path: Path) -> Iterator[SharedDb]:
    yield from make_shared_db("postgresql", tmp_path, pg_url)


class Reads:
    """Rows and SELECTs of ``heartbeat_workspaces`` one engine ran."""

    def __init__(self, engine: Any) -> None:
        from sqlalchemy import event

        self.selects = self.rows = 0
        event.listen(engine, "after_cursor_execute", self._after)

    def _after(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip()[:6].upper() == "SELECT" and "FROM heartbeat_workspaces" in statement:
            self.selects += 1
            self.rows += max(cursor.rowcount, 0)


def test_a_cycle_on_postgresql_reads_again_only_the_rows_it_plans(pg_db: SharedDb) -> None:
    """Gateway A holds every row; B's units change two of them and B's user pauses a
    third. A's next cycle reads the marker and the one row it plans (not all 50); the
    pause moves the marker, so A's cycle after that reads every row again."""
    store_a, store_b = pg_db.open(), pg_db.open()
    try:
        a, b = HeartbeatState(store_a), HeartbeatState(store_b)
        at = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
        names = [f"w{n:02d}" for n in range(50)]
        b.apply([WorkspaceChange(n, decision="skip", reason="empty", decided_at=at) for n in names])
        assert len(a.all_workspaces()) == 50
        b.apply([WorkspaceChange(n, day="2026-03-10", tokens=5) for n in ("w03", "w07")])
        reads = Reads(store_a.engine)
        a.refresh()
        got = a.fresh(["w03"])
        assert got["w03"].tokens_today == 5 and a.workspace("w03").tokens_today == 5
        assert (reads.selects, reads.rows) == (2, 1)  # the marker (none yet) and w03
        assert a.workspace("w07").tokens_today == 0  # not planned: not read
        b.pause("w09", "user", at)
        b.bump_generation("*")  # as HeartbeatService.pause does
        a.refresh()
        a.fresh(["w03"])
        assert a.workspace("w09").paused and a.workspace("w07").tokens_today == 5
        assert reads.rows == 1 + 1 + 51  # the marker, then all 50 rows and the marker row
    finally:
        store_a.close()
        store_b.close()
