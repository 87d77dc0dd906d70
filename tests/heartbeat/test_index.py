"""The heartbeat index: a cycle plans what changed, and agrees with a full rescan."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vikingbot import fsutil
from vikingbot.clock import FakeClock
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.gateway import compose
from vikingbot.heartbeat.planner import Decision
from vikingbot.heartbeat.state import WorkspaceChange
from vikingbot.session.types import Message, SessionKey
from vikingbot.workspace.manager import checked_name

TEMPLATE = "# Heartbeat Tasks\n\n## Active Tasks\n\n<!-- add tasks below -->\n\n## Completed\n"
TASK = TEMPLATE.replace("<!-- add tasks below -->\n", "<!-- add tasks below -->\n- Check mail\n")
SCHEDULED = TEMPLATE.replace(
    "<!-- add tasks below -->\n",
    "<!-- add tasks below -->\n- every: 2h title: Plants task: Water them\n",
)
FILES = {"template": TEMPLATE, "task": TASK, "scheduled": SCHEDULED, "bad": "- \udcff"}


class Home:
    def __init__(
        self,
        root: Path,
        mode: str = "per-session",
        start: datetime | None = None,
        heartbeat: dict[str, Any] | None = None,
    ) -> None:
        self.root = root
        self.clock = FakeClock(start or datetime(2026, 3, 10, 12, 0, tzinfo=UTC))
        paths = Paths(
            home=root,
            config_file=root / "config.json",
            data_dir=root / "data",
            database_url=f"sqlite:///{root / 'data' / 'state.db'}",
        )
        config = Config.model_validate(
            {
                "bot": {
                    "sandbox": {"mode": mode},
                    "heartbeat": {"timezone": "UTC", **(heartbeat or {})},
                }
            }
        )
        self.rt = compose.build_home(config, paths, clock=self.clock, environ={})
        self.svc = compose.heartbeat(self.rt)
        self.mode = mode
        self.rt.paths.workspace_root.mkdir(parents=True, exist_ok=True)

    def key(self, chat: int) -> SessionKey:
        return SessionKey("telegram", f"bot{chat % 2}", f"c{chat}")

    def ws(self, chat: int) -> Path:
        return self.rt.paths.workspace_root / checked_name(self.key(chat), self.mode)

    def talk(self, chat: int, ago: timedelta = timedelta(minutes=5)) -> None:
        at = self.clock.now() - ago
        self.rt.sessions.append(self.key(chat), Message("user", "hi", at))

    def write(self, chat: int, text: str, *, atomic: bool = False) -> Path:
        path = self.ws(chat) / "HEARTBEAT.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() or path.is_symlink():
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        if atomic:
            tmp = path.parent / ".hb.tmp"
            tmp.write_text(text, encoding="utf-8", errors="surrogateescape")
            os.replace(tmp, path)
        else:
            path.write_text(text, encoding="utf-8", errors="surrogateescape")
        return path

    def memo_cycle(self) -> list[tuple[Any, ...]]:
        """What the gateway's cycle decides (planning only; no agent turn)."""
        reused, fresh, _ = self.svc._plan(
            "scheduled", workspace=None, force=True, include_idle=False, memo=True
        )
        return norm(reused + fresh)

    def rescan(self) -> list[tuple[Any, ...]]:
        """The same decisions from a scanner that has never seen this home."""
        decisions, _ = compose.heartbeat(self.rt).plan("scheduled", force=True, include_idle=False)
        return norm(decisions)

    def close(self) -> None:
        self.svc.scanner.close()
        self.rt.close()


def norm(decisions: list[Decision]) -> list[tuple[Any, ...]]:
    return sorted(
        (d.workspace, d.decision, d.reason, d.session or "", d.entry or "", d.detail or "")
        for d in decisions
    )


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    h = Home(tmp_path / "home")
    yield h
    h.close()


def run_decisions(rows: list[tuple[Any, ...]]) -> list[str]:
    return sorted(r[0] for r in rows if r[1] == "run")


# ---------------------------------------------------------------- behaviour


def test_heartbeat_sessions_live_apart_and_old_ones_are_moved(home: Home) -> None:
    store = home.rt.sessions
    legacy = SessionKey("heartbeat", "hb", "ws1")
    old_path = store.sessions_dir / "heartbeat+hb+ws1.jsonl"
    store.sessions_dir.mkdir(parents=True, exist_ok=True)
    # a file an older version wrote among the user's sessions
    fresh = SessionStore_like_line(legacy)
    old_path.write_bytes(fresh)
    home.talk(1)
    listed = [m.key for m in store.list_sessions()]
    assert listed == [home.key(1)]  # the user's sessions only
    assert not old_path.exists()
    assert (store.system_dir / old_path.name).read_bytes() == fresh  # moved, unchanged
    before = os.stat(store.sessions_dir).st_mtime_ns
    store.append(legacy, Message("assistant", "HEARTBEAT_OK", home.clock.now()))
    assert os.stat(store.sessions_dir).st_mtime_ns == before  # user folder untouched
    assert store.path_for(legacy).parent == store.system_dir


def test_an_old_doctor_session_is_no_longer_listed_as_a_chat(home: Home) -> None:
    """`doctor --live` used to talk in cli:doctor:doctor, among the user's chats."""
    store = home.rt.sessions
    old = store.sessions_dir / "cli+doctor+doctor.jsonl"
    store.sessions_dir.mkdir(parents=True, exist_ok=True)
    old.write_bytes(SessionStore_like_line(SessionKey("cli", "doctor", "doctor")))
    home.talk(1)
    assert [m.key for m in store.list_sessions()] == [home.key(1)]
    assert not old.exists() and (store.system_dir / old.name).exists()


def test_an_old_heartbeat_session_found_by_a_cycle_is_moved_and_not_planned(home: Home) -> None:
    home.talk(1)
    home.write(1, TASK)
    before = home.memo_cycle()
    # an older version (another process on this home) writes its heartbeat session among
    # the user's: the next cycle's listing moves it to .system/ and plans the same
    store = home.rt.sessions
    old_path = store.sessions_dir / "heartbeat+hb+ws2.jsonl"
    old_path.write_bytes(SessionStore_like_line(SessionKey("heartbeat", "hb", "ws2")))
    home.clock.advance(seconds=600)
    after = home.memo_cycle()
    assert not old_path.exists()
    assert (store.system_dir / old_path.name).is_file()
    assert [r[:3] for r in after] == [r[:3] for r in before]
    assert after == home.rescan()


def test_moving_never_overwrites_a_session_already_in_the_new_place(home: Home) -> None:
    store = home.rt.sessions
    key = SessionKey("cron", "job", "daily")
    store.append(key, Message("assistant", "new", home.clock.now()))  # in .system
    old_path = store.sessions_dir / store.path_for(key).name
    old_path.write_bytes(SessionStore_like_line(key))
    store._system_moved = False  # a new process
    store.list_sessions()
    assert not old_path.exists()
    kept = store.system_dir / (old_path.name + ".before-move")
    assert kept.read_bytes() == SessionStore_like_line(key)
    assert store.read_messages(key)[-1].content == "new"


def SessionStore_like_line(key: SessionKey) -> bytes:
    from vikingbot.session import codec
    from vikingbot.session.types import SessionMeta

    at = datetime(2026, 1, 1, tzinfo=UTC)
    return codec.dumps_line(codec.meta_to_obj(SessionMeta(key, at, at)))


def test_cycle_plans_only_what_changed_and_keeps_the_rest(home: Home) -> None:
    for chat in range(4):
        home.talk(chat)
        home.write(chat, TEMPLATE)
    first = home.memo_cycle()
    assert {r[2] for r in first} == {"empty"}
    home.write(2, TASK)
    second = home.memo_cycle()
    assert run_decisions(second) == [home.ws(2).name]
    assert second == home.rescan()
    assert home.svc.scanner._planned == {home.ws(2).name}  # the other three were kept


def test_a_session_going_stale_changes_the_decision_without_any_file_change(home: Home) -> None:
    home.talk(1, ago=timedelta(hours=47))
    home.write(1, TEMPLATE)
    assert {r[2] for r in home.memo_cycle()} == {"empty"}  # quiet: kept from now on
    home.clock.advance(hours=2)  # stale_after is two days
    rows = home.memo_cycle()
    # the session's row says so; the file is still looked at (standing orders)
    assert {(r[2], r[3]) for r in rows} == {("stale", str(home.key(1))), ("empty", "")}
    assert rows == home.rescan()


def test_a_stale_workspace_that_comes_back_has_its_file_polled_again(home: Home) -> None:
    """Polling keeps the eligible workspaces' files in a list between cycles; one that
    went stale and is talked to again is back in it: a later edit of its file counts."""
    home.talk(1, ago=timedelta(hours=47))
    home.write(1, TEMPLATE)
    home.talk(2)
    home.write(2, TEMPLATE)
    home.memo_cycle()
    home.clock.advance(hours=2)  # workspace 1 goes stale (stale_after is two days)
    assert {r[2] for r in home.memo_cycle()} == {"stale", "empty"}
    home.memo_cycle()  # a routine cycle, from the list of eligible files
    home.talk(1)  # back
    assert {r[2] for r in home.memo_cycle()} == {"empty"}
    home.write(1, TASK)
    rows = home.memo_cycle()
    assert run_decisions(rows) == [home.ws(1).name] and rows == home.rescan()


def test_polling_sees_a_settled_file_edited_in_place(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A HEARTBEAT.md read long after it was written is trusted by its identity; an
    edit in place keeps the inode, and the next routine polling cycle still sees it."""
    monkeypatch.setattr(fsutil, "RACY_NS", 0)  # files trusted at once
    for chat in (1, 2):
        home.talk(chat)
        home.write(chat, TEMPLATE)
    home.memo_cycle()
    home.memo_cycle()  # a routine cycle: both files settled, nothing differs
    path = home.ws(2) / "HEARTBEAT.md"
    before = path.stat()
    while path.stat().st_ctime_ns == before.st_ctime_ns:  # until the clock's tick moves on
        home.write(2, TASK)
    assert path.stat().st_ino == before.st_ino
    rows = home.memo_cycle()
    assert run_decisions(rows) == [home.ws(2).name] and rows == home.rescan()


def test_polling_sees_a_session_an_editor_rewrote_in_place_beside_a_chat(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor that saves by copying the file to a backup beside it and writing over
    the original (vim with ``backupcopy=yes``) turns a session's heartbeat off while a
    chat writes another session: the next routine polling cycle decides as a full
    rescan does. The file keeps its inode (as a file replaced twice can too: a freed
    inode number is handed out again), so names and inodes alone showed nothing;
    the backup moved the folder's mtime between the store's writes."""
    monkeypatch.setattr(fsutil, "RACY_NS", 0)  # files trusted at once
    for chat in (1, 2):
        home.talk(chat)
        home.write(chat, TASK)
    home.memo_cycle()
    path = home.rt.sessions.path_for(home.key(2))
    before = path.stat()
    next_tick(home.root / ".tick")  # what changes from here gets another mtime
    data = path.read_bytes()
    flipped = data.replace(b'"skip_heartbeat": false', b'"skip_heartbeat": true')
    assert flipped != data
    backup = path.with_name(path.name + "~")
    backup.write_bytes(data)
    with open(path, "r+b") as f:  # in place: the same inode
        f.write(flipped)
        f.truncate()
    backup.unlink()
    assert path.stat().st_ino == before.st_ino
    home.talk(1)
    rows = home.memo_cycle()
    assert rows == home.rescan()
    assert home.ws(2).name not in run_decisions(rows)


def test_polling_sees_the_stores_writes_and_another_tools_removal(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chats written through the session store (the gateway, the CLI) and a session file
    another tool removes are both seen by the next polling cycle."""
    monkeypatch.setattr(fsutil, "RACY_NS", 0)  # files trusted at once
    for chat in range(3):
        home.talk(chat)
        home.write(chat, TASK)
    home.memo_cycle()
    home.rt.sessions.update_metadata(home.key(1), skip_heartbeat=True)  # `/heartbeat off`
    home.talk(2)
    rows = home.memo_cycle()
    assert home.ws(1).name not in run_decisions(rows) and rows == home.rescan()
    next_tick(home.root / ".tick")  # another tool's change comes in a later tick
    home.rt.sessions.path_for(home.key(0)).unlink()  # a sync client removes a session
    rows = home.memo_cycle()
    assert home.ws(0).name not in run_decisions(rows) and rows == home.rescan()


def test_a_terminal_only_workspace_with_work_runs_and_goes_on_running(tmp_path: Path) -> None:
    """`vikingbot chat` flags its session; its workspace is still visited, and the shared
    workspace's checklist stands when the terminal goes quiet."""
    h = Home(tmp_path / "home", mode="shared")
    try:
        key = SessionKey("cli", "default", "local")
        h.rt.sessions.get_or_create(key, skip_heartbeat=True)
        h.rt.sessions.append(key, Message("user", "hi", h.clock.now()))
        (h.rt.paths.workspace_root / "shared").mkdir(parents=True, exist_ok=True)
        (h.rt.paths.workspace_root / "shared" / "HEARTBEAT.md").write_text(TASK)
        rows = h.memo_cycle()
        assert run_decisions(rows) == ["shared"] and rows == h.rescan()
        h.clock.advance(days=2, minutes=1)  # the terminal went quiet for stale_after
        rows = h.memo_cycle()
        assert run_decisions(rows) == ["shared"] and rows == h.rescan()
    finally:
        h.close()


def test_pause_from_another_process_replans_a_quiet_workspace(home: Home) -> None:
    home.talk(1)
    home.write(1, TEMPLATE)
    home.memo_cycle()
    compose.heartbeat(home.rt).pause(home.ws(1).name)  # e.g. the CLI
    home.write(1, TASK)
    rows = home.memo_cycle()
    assert "paused" in {r[2] for r in rows} and rows == home.rescan()


def settle(index: Any) -> None:
    """Make every session file look older than the racy-write window. (The sessions
    folder is trusted by its ctime, which no one can set: tests that need it trusted
    at once set ``fsutil.RACY_NS`` to 0.)"""
    old = time_ago(10)
    for p in index.sessions_dir.glob("*.jsonl"):
        os.utime(p, ns=(old, old))


def test_polling_sees_a_session_file_another_tool_replaced_or_removed(home: Home) -> None:
    for chat in range(3):
        home.talk(chat)
        home.write(chat, TASK)
    index = home.svc.scanner.index
    settle(index)
    home.memo_cycle()
    # another tool (a sync client, an editor) replaces a session file
    path = home.rt.sessions.path_for(home.key(2))
    text = path.read_bytes().replace(b'"skip_heartbeat": false', b'"skip_heartbeat": true')
    assert b'"skip_heartbeat": true' in text
    tmp = path.with_name(".other-tool.tmp")
    tmp.write_bytes(text)
    os.replace(tmp, path)
    home.rt.sessions.path_for(home.key(0)).unlink()  # and removes another
    rows = home.memo_cycle()
    assert rows == home.rescan()
    assert run_decisions(rows) == [home.ws(1).name]


def test_a_session_edited_in_place_by_hand_shows_on_the_next_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session file edited in place by hand (same inode, the folder unchanged) is
    seen by the next polling cycle, not only by the hourly safety pass."""
    monkeypatch.setattr(fsutil, "RACY_NS", 0)  # the folder trusted at once
    h = Home(tmp_path / "home")
    try:
        for chat in range(2):
            h.talk(chat)
            h.write(chat, TASK)
        settle(h.svc.scanner.index)
        assert run_decisions(h.memo_cycle()) == sorted([h.ws(0).name, h.ws(1).name])
        path = h.rt.sessions.path_for(h.key(1))
        text = path.read_bytes().replace(b'"skip_heartbeat": false', b'"skip_heartbeat":  true')
        assert b'"skip_heartbeat":  true' in text
        with path.open("r+b") as fh:
            fh.write(text)
        h.clock.advance(minutes=1)
        assert run_decisions(h.memo_cycle()) == [h.ws(0).name]
    finally:
        h.close()


def time_ago(seconds: float) -> int:
    return int((datetime.now(UTC).timestamp() - seconds) * 1e9)


def test_watcher_events_reach_the_next_cycle(home: Home) -> None:
    for chat in range(3):
        home.talk(chat)
        home.write(chat, TEMPLATE)
    assert _watch(home.svc)
    home.memo_cycle()
    watcher = home.svc.scanner.index.watcher
    assert watcher is not None and watcher.running
    path = home.write(1, TASK, atomic=True)
    assert watcher.wait_for([path])
    rows = home.memo_cycle()
    assert run_decisions(rows) == [home.ws(1).name] and rows == home.rescan()


def test_a_hand_made_plan_sees_a_chat_the_watcher_has_not_handed_over_yet(home: Home) -> None:
    """The user chats, then asks for ``heartbeat run-now`` at once. The watcher's
    events are taken at the next cycle, so a plan made by hand also reads the sessions
    and every HEARTBEAT.md again."""
    home.talk(1, ago=timedelta(days=30))  # long quiet: the workspace is not visited
    home.write(1, TASK)
    assert home.svc.scanner.watch()
    assert run_decisions(home.memo_cycle()) == []
    home.talk(1)  # a message now: the workspace is visited again
    reused, fresh, _ = home.svc._plan(
        "manual", workspace=None, force=True, include_idle=False, memo=False
    )
    assert run_decisions(norm(reused + fresh)) == [home.ws(1).name]


def test_a_dead_watcher_falls_back_to_polling(home: Home) -> None:
    home.talk(1)
    home.write(1, TEMPLATE)
    assert _watch(home.svc)
    home.memo_cycle()
    watcher = home.svc.scanner.index.watcher
    assert watcher is not None and watcher._current is not None
    watcher._current.notify.close()  # the OS watch goes away
    home.write(1, TASK)  # no event will come for this
    rows = home.memo_cycle()
    assert run_decisions(rows) == [home.ws(1).name]
    assert not watcher.running and watcher.problem


# ---------------------------------------------------------------- faults

CHATS = st.integers(0, 3)
OPS = st.one_of(
    st.tuples(st.just("talk"), CHATS, st.sampled_from([5, 60 * 46, 60 * 72])),
    st.tuples(st.just("skip"), CHATS, st.booleans()),
    st.tuples(st.just("forget"), CHATS),
    st.tuples(st.just("write"), CHATS, st.sampled_from(sorted(FILES)), st.booleans()),
    st.tuples(st.just("rm_file"), CHATS),
    st.tuples(st.just("file_to_dir"), CHATS),
    st.tuples(st.just("file_to_link"), CHATS),
    st.tuples(st.just("rm_ws"), CHATS),
    st.tuples(st.just("mv_ws"), CHATS),
    st.tuples(st.just("time"), st.sampled_from([10, 60 * 3, 60 * 24])),
    st.tuples(st.just("replace_session"), CHATS),
    st.tuples(st.just("cycle")),
    st.tuples(st.just("restart")),
)


def apply(h: Home, op: tuple[Any, ...], outside: Path) -> list[Path]:
    """Do one change; the paths a watcher should report for it."""
    kind, *args = op
    ws = h.ws(args[0]) if args and kind != "time" else None
    hb = ws / "HEARTBEAT.md" if ws else None
    if kind == "talk":
        h.talk(args[0], timedelta(minutes=args[1]))
        return [h.rt.sessions.path_for(h.key(args[0]))]
    if kind == "skip" and h.rt.sessions.get_meta(h.key(args[0])) is not None:
        h.rt.sessions.update_metadata(h.key(args[0]), skip_heartbeat=args[1])
        return [h.rt.sessions.path_for(h.key(args[0]))]
    if kind == "forget" and h.rt.sessions.path_for(h.key(args[0])).exists():
        h.rt.sessions.path_for(h.key(args[0])).unlink()
        return [h.rt.sessions.path_for(h.key(args[0]))]
    if kind == "write":
        return [h.write(args[0], FILES[args[1]], atomic=args[2])]
    if kind == "rm_file" and hb is not None and hb.is_file() and not hb.is_symlink():
        hb.unlink()
        return [hb]
    if kind == "file_to_dir" and hb is not None and ws is not None and ws.is_dir():
        if hb.is_file() or hb.is_symlink():
            hb.unlink()
        hb.mkdir(exist_ok=True)
        return [hb]
    if kind == "file_to_link" and hb is not None and ws is not None and ws.is_dir():
        target = outside / "tasks.md"
        target.write_text(TASK)
        if hb.is_dir() and not hb.is_symlink():
            shutil.rmtree(hb)
        elif hb.exists() or hb.is_symlink():
            hb.unlink()
        hb.symlink_to(target)
        return [hb]
    if kind == "rm_ws" and ws is not None and ws.is_dir():
        shutil.rmtree(ws)
        return [ws]
    if kind == "mv_ws" and ws is not None and ws.is_dir():
        aside = ws.with_name(ws.name + ".aside")
        shutil.rmtree(aside, ignore_errors=True)
        ws.rename(aside)
        return [ws]
    if kind == "replace_session":  # another tool (a sync client) replaces the file
        path = h.rt.sessions.path_for(h.key(args[0]))
        if path.exists():
            data = path.read_bytes()
            flipped = data.replace(b'"skip_heartbeat": false', b'"skip_heartbeat": true')
            if flipped == data:
                flipped = data.replace(b'"skip_heartbeat": true', b'"skip_heartbeat": false')
            tmp = path.with_name(".sync.tmp")
            tmp.write_bytes(flipped)
            os.replace(tmp, path)
            return [path]
    if kind == "time":
        h.clock.advance(minutes=args[0])
    return []


def next_tick(probe: Path) -> None:
    """Return once file timestamps have moved past everything looked at so far (a
    probe file written until its mtime changes): what a file changes to afterwards
    gets another identity, as the 2 s rule guarantees when ``fsutil.RACY_NS`` is real."""
    probe.write_bytes(b"")
    start = probe.stat().st_mtime_ns
    while probe.stat().st_mtime_ns == start:
        probe.write_bytes(b"")


def check_sequence(ops: list[tuple[Any, ...]], *, watch: bool, settled: bool = False) -> None:
    """``settled``: every file is trusted by its identity once looked at (``fsutil.RACY_NS``
    is 0 and the clock's tick moves on after each cycle), so the cheap paths decide,
    not the re-reads of files written a moment ago."""
    with tempfile.TemporaryDirectory() as tmp:
        h = Home(Path(tmp) / "home", mode="per-channel" if len(ops) % 3 == 0 else "per-session")
        outside = Path(tmp) / "outside"
        outside.mkdir()
        try:
            for chat in range(2):  # some state from before the gateway started
                h.talk(chat)
                h.write(chat, TEMPLATE)
            if watch:
                assert _watch(h.svc)
            assert h.memo_cycle() == h.rescan()
            if settled:
                next_tick(outside / ".tick")
            for op in ops:
                if op[0] == "restart":  # the gateway stops and starts again
                    h.close()
                    apply(h, ("write", 1, "task", True), outside)  # changed while it was down
                    h.talk(2)
                    h = Home(h.root, mode=h.mode, start=h.clock.now())
                    if watch:
                        assert _watch(h.svc)
                    touched = []
                    continue
                if settled and op[0] in ("forget", "replace_session"):
                    # another tool's change to the sessions folder comes in a later
                    # timestamp tick than the last listing: what trusting a folder's
                    # mtime at once (RACY_NS 0) assumes
                    next_tick(outside / ".tick")
                touched = apply(h, op, outside)
                if op[0] != "cycle":
                    continue
                watcher = h.svc.scanner.index.watcher
                if watcher is not None:
                    assert watcher.wait_for(touched) or not watcher.running
                assert h.memo_cycle() == h.rescan(), ops
                if settled:
                    next_tick(outside / ".tick")
            watcher = h.svc.scanner.index.watcher
            if watcher is not None:
                assert watcher.wait_for(touched) or not watcher.running
            assert h.memo_cycle() == h.rescan(), ops
        finally:
            h.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=10))
def test_polling_index_agrees_with_a_full_rescan(ops: list[tuple[Any, ...]]) -> None:
    check_sequence(ops, watch=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=10))
def test_polling_index_agrees_with_a_full_rescan_once_files_settle(
    ops: list[tuple[Any, ...]],
) -> None:
    """The same sequences with every file settled by the next cycle: the routine
    polling cycle then trusts inodes and ctimes, the eligible list and the sessions
    folder's mtime, and must still decide what a full rescan decides."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fsutil, "RACY_NS", 0)
        check_sequence(ops, watch=False, settled=True)


def test_watched_index_agrees_with_a_full_rescan() -> None:
    """Random sequences with the watcher on; each cycle runs once the events arrived."""
    import random

    rnd = random.Random(12)
    strategy_ops: list[list[tuple[Any, ...]]] = []
    for _ in range(6):
        seq: list[tuple[Any, ...]] = []
        for _ in range(8):
            seq.append(_random_op(rnd))
            if rnd.random() < 0.4:
                seq.append(("cycle",))
        strategy_ops.append(seq)
    for seq in strategy_ops:
        check_sequence_with_pending_events(seq)


def check_sequence_with_pending_events(ops: list[tuple[Any, ...]]) -> None:
    """Like :func:`check_sequence`, but every change is waited for (no race with the OS)."""
    with tempfile.TemporaryDirectory() as tmp:
        h = Home(Path(tmp) / "home")
        outside = Path(tmp) / "outside"
        outside.mkdir()
        try:
            for chat in range(2):
                h.talk(chat)
                h.write(chat, TEMPLATE)
            assert _watch(h.svc)
            h.memo_cycle()
            for op in [*ops, ("cycle",)]:
                index = h.svc.scanner.index
                if op[0] == "kill" and index.watcher is not None and index.watcher._current:
                    index.watcher._current.notify.close()  # the watch dies
                    continue
                if op[0] == "down":  # the gateway stops; changes happen; it starts again
                    index.close()
                    apply(h, ("write", 0, "task", False), outside)
                    h.talk(3)
                    assert _watch(h.svc)
                    continue
                touched = reported(index, apply(h, op, outside))
                watcher = index.watcher
                assert watcher is not None
                assert watcher.wait_for(touched) or not watcher.running, (op, touched)
                if op[0] == "cycle":
                    assert h.memo_cycle() == h.rescan(), ops
        finally:
            h.close()


def reported(index: Any, paths: list[Path]) -> list[Path]:
    """The paths the OS reports: not a file in a folder made after the watch began
    (the index looks at those folders every cycle until it renews the watch)."""
    root = index.root
    return [
        p
        for p in paths
        if p.parent in (root, index.sessions_dir) or p.parent.name in index._watched
    ]


def _random_op(rnd: Any) -> tuple[Any, ...]:
    chat = rnd.choice([0, 0, 1, 1, 2, 3])  # 0 and 1 have folders the watch covers
    return rnd.choice(
        [
            ("talk", chat, rnd.choice([5, 60 * 46, 60 * 72])),
            ("skip", chat, rnd.random() < 0.5),
            ("forget", chat),
            ("write", chat, rnd.choice(sorted(FILES)), rnd.random() < 0.5),
            ("rm_file", chat),
            ("file_to_dir", chat),
            ("file_to_link", chat),
            ("rm_ws", chat),
            ("mv_ws", chat),
            ("time", rnd.choice([10, 60 * 3, 60 * 24])),
            ("replace_session", chat),
            ("kill",),
            ("down",),
        ]
    )


# ---------------------------------------------------------------- restarts


def test_a_restart_does_not_write_the_skip_streaks_again(tmp_path: Path) -> None:
    import asyncio

    from vikingbot.heartbeat.types import LedgerRow

    root = tmp_path / "home"
    h = Home(root)
    for chat in range(3):
        h.talk(chat)
        h.write(chat, TEMPLATE)
    asyncio.run(h.svc.run_cycle("scheduled"))
    first = h.svc.state.runs(limit=100)
    assert sorted(r["reason"] for r in first) == ["empty"] * 3  # three streaks start
    h.close()

    h = Home(root)  # the gateway restarted: the streaks go on, nothing is written
    asyncio.run(h.svc.run_cycle("scheduled"))
    assert len(h.svc.state.runs(limit=100)) == 3
    # a run ends workspace 1's streak (as the runner records it) ...
    run = LedgerRow("c1", h.clock.now(), h.ws(1).name, "scheduled", "run", "due", outcome="ok")
    assert h.svc.keep_row(run)
    h.svc.state.finish([([run], WorkspaceChange(h.ws(1).name))])
    h.close()

    h = Home(root)  # ... so after another restart its next skip starts a new streak
    try:
        asyncio.run(h.svc.run_cycle("scheduled"))
        rows = h.svc.state.runs(limit=100)
        assert [(r["workspace"], r["decision"]) for r in rows[:2]] == [
            (h.ws(1).name, "skip"),
            (h.ws(1).name, "run"),
        ]
        assert len(rows) == 5
    finally:
        h.close()


def test_a_not_due_entry_is_planned_every_cycle_a_quiet_workspace_once(home: Home) -> None:
    """A workspace whose only entry is not due yet is planned again each cycle (the
    clock alone makes it due); a quiet one keeps its decision. Each cycle decides what
    a scanner that never saw the home decides, before and when the entry falls due."""
    home.talk(1)
    home.write(1, SCHEDULED)  # every 2h, first seen by the first cycle
    home.talk(2)
    home.write(2, TEMPLATE)
    planned: dict[str, list[int]] = {home.ws(1).name: [], home.ws(2).name: []}
    ran: list[int] = []
    for step in range(15):  # the default 10-minute cycles (each 2 s early), 2.5 hours
        reused, fresh, inputs = home.svc._plan(
            "scheduled", workspace=None, force=True, include_idle=False, memo=True
        )
        home.svc._remember_entries(inputs, home.clock.now())
        assert norm(reused + fresh) == home.rescan(), step
        for d in fresh:
            planned[d.workspace].append(step)
            if d.decision == "run":
                ran.append(step)
        home.clock.advance(seconds=598)
    assert planned == {home.ws(1).name: list(range(15)), home.ws(2).name: [0]}
    # due from the first cycle at or after its two hours (never early: the 12th comes
    # 24 s before them); planning records no run: it stays due
    assert ran == [13, 14]


def _watch(svc: Any) -> bool:
    """Start the heartbeat's watcher (these tests wait for its events after each change)."""
    return bool(svc.scanner.watch())
