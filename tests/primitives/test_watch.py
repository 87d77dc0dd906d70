"""`vikingbot.watch.Watcher` on a real folder: what it hands over, and when it says
"rescan everything"."""

from __future__ import annotations

import threading
from pathlib import Path

from vikingbot.watch import Watcher


def test_a_pulled_watcher_hands_over_accepted_changes_once(tmp_path: Path) -> None:
    watcher = Watcher([tmp_path], name="test", pull=True, accept=lambda p: not p.endswith(".tmp"))
    assert watcher.start() and watcher.running
    try:
        assert watcher.drain() == set()  # nothing happened yet
        kept, ignored = tmp_path / "a.txt", tmp_path / "b.tmp"
        ignored.write_text("x")
        kept.write_text("x")
        assert watcher.wait_for([kept])
        assert watcher.drain() == {str(kept)}
        assert watcher.drain() == set()  # handed over once
        kept.write_text("y")  # an edit in place is a change too
        assert watcher.wait_for([kept])
        assert watcher.drain() == {str(kept)}
    finally:
        watcher.stop()
    assert not watcher.running
    assert watcher.drain() is None  # stopped: whatever happens now is unknown


def test_a_pushed_watcher_calls_on_change_from_its_thread(tmp_path: Path) -> None:
    changed = threading.Event()
    told: list[set[str]] = []
    watcher = Watcher(
        [tmp_path],
        name="test",
        on_change=lambda paths: (told.append(paths), changed.set()),
        step_ms=50,
    )
    assert watcher.start()
    try:
        (tmp_path / "config.json").write_text("{}")
        assert changed.wait(10)
        assert told[0] == {str(tmp_path / "config.json")}  # the paths that arrived
        assert watcher.drain() == {str(tmp_path / "config.json")}
    finally:
        watcher.stop()


def test_a_dead_watch_makes_the_next_drain_say_rescan(tmp_path: Path) -> None:
    watcher = Watcher([tmp_path], name="test", pull=True)
    assert watcher.start()
    try:
        gen = watcher._current
        assert gen is not None
        gen.notify.close()  # the OS watch goes away under it
        (tmp_path / "a.txt").write_text("x")  # no event will come for this
        assert watcher.drain() is None
        assert not watcher.running
    finally:
        watcher.stop()


def test_a_restart_keeps_watching_without_a_gap(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    watcher = Watcher([first], name="test", pull=True)
    assert watcher.start()
    try:
        (first / "before.txt").write_text("x")
        assert watcher.wait_for([first / "before.txt"])
        assert watcher.restart([first, second])
        (second / "after.txt").write_text("x")
        assert watcher.wait_for([second / "after.txt"])
        assert watcher.drain() == {str(first / "before.txt"), str(second / "after.txt")}
    finally:
        watcher.stop()
