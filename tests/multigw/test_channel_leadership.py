"""One poller of a (fake) Telegram at any moment across gateways, and takeover after a SIGKILL.

Each "gateway" is a real process (``tests.support.channel_node``) running the
channel manager against one shared database; the fake Telegram answers a second
concurrent ``getUpdates`` with 409 and counts it, as the real API does.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.databases import SharedDb
from tests.support.fake_telegram import FakeTelegram

# short for the test (15 s and 5 s by default), but long enough that a node stalled by
# a loaded machine (three workers on two cores) does not lose the lease while it works
TTL_S, CHECK_S = 3.0, 0.5
ROOT = Path(__file__).resolve().parents[2]


class Node:
    def __init__(self, name: str, db: SharedDb, api_base: str, token: str) -> None:
        self.name = name
        self.got: list[str] = []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.channel_node",
                name,
                db.url,
                db.schema or "-",
                api_base,
                token,
                str(TTL_S),
                str(CHECK_S),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )

    def next_state(self, timeout: float = 30.0) -> tuple[float, str]:
        """The next leadership line: (unix time, "held" | "standby"); the messages
        received meanwhile go to ``got``."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line:
                at, state, *text = line.rstrip("\n").split(" ", 2)
                if state == "got":
                    self.got.append(text[0] if text else "")
                    continue
                return float(at), state
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}")
        raise AssertionError(f"{self.name}: no leadership change in {timeout}s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def telegram() -> Iterator[tuple[FakeTelegram, str]]:
    fake = FakeTelegram(max_poll_s=0.3)
    with fake.serve() as api_base:
        yield fake, api_base


def _wait_polls(fake: FakeTelegram, more: int) -> None:
    start = fake.polls
    deadline = time.monotonic() + 20
    while fake.polls < start + more:
        assert time.monotonic() < deadline, "no polling"
        time.sleep(0.02)


# PostgreSQL only: three processes are slow to start on a loaded machine, and SQLite
# (one gateway per home) runs the very same lease code, tested in tests/store.
@pytest.mark.parametrize("shared_db", ["postgresql"], indirect=True)
def test_one_poller_at_a_time_and_takeover_after_sigkill(
    shared_db: SharedDb, telegram: tuple[FakeTelegram, str]
) -> None:
    fake, api = telegram
    shared_db.open().close()  # migrate once, before the nodes race to
    nodes = [Node(f"gw-{n}", shared_db, api, fake.token) for n in "abc"]
    try:
        t0 = time.monotonic()
        states = {node.name: node.next_state()[1] for node in nodes}
        assert sorted(states.values()) == ["held", "standby", "standby"], states
        leader = next(node for node in nodes if states[node.name] == "held")
        b, c = (node for node in nodes if node is not leader)
        _wait_polls(fake, 3)
        started = time.monotonic() - t0

        leader.stop(signal.SIGKILL)  # no release: the others must wait for the lease to run out
        killed_at = time.time()
        (b_at, b_state), (c_at, c_state) = _first_of(b, c)
        taken_at = min(at for at, state in ((b_at, b_state), (c_at, c_state)) if state == "held")
        assert taken_at - killed_at < TTL_S + CHECK_S + 2.0
        _wait_polls(fake, 3)

        survivor, other = (b, c) if b_state == "held" else (c, b)
        survivor.stop()  # a clean stop hands the channel on at once
        assert other.next_state()[1] == "held"
        _wait_polls(fake, 3)
        assert fake.overlaps == 0  # never two pollers at once
        assert started < 60
    finally:
        for node in nodes:
            node.stop(signal.SIGKILL)


def _first_of(b: Node, c: Node) -> tuple[tuple[float, str], tuple[float, str]]:
    """The new state of whichever standby took over; the other stays standby."""
    import selectors

    sel = selectors.DefaultSelector()
    for node in (b, c):
        assert node.proc.stdout is not None
        sel.register(node.proc.stdout, selectors.EVENT_READ, node)
    ready = sel.select(timeout=30)
    sel.close()
    assert ready, "nobody took the channel over"
    winner = ready[0][0].data
    found = winner.next_state()
    standby = (0.0, "standby")
    return (found, standby) if winner is b else (standby, found)


def _read_got(node: Node, until: Callable[[], bool], timeout: float = 30.0) -> None:
    """Read ``node``'s lines (messages into ``node.got``) until ``until()`` holds."""
    import selectors

    assert node.proc.stdout is not None
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(node.proc.stdout, selectors.EVENT_READ)
    try:
        while not until():
            assert time.monotonic() < deadline, f"{node.name}: got only {node.got}"
            if sel.select(timeout=0.2):
                line = node.proc.stdout.readline()
                _at, state, *text = line.rstrip("\n").split(" ", 2)
                if state == "got":
                    node.got.append(text[0] if text else "")
    finally:
        sel.close()


@pytest.mark.parametrize("shared_db", ["postgresql"], indirect=True)
def test_a_failover_neither_answers_an_update_twice_nor_skips_one(
    shared_db: SharedDb, telegram: tuple[FakeTelegram, str]
) -> None:
    """The update offset is stored in the database: the gateway that takes the channel
    over after a SIGKILL goes on from the last update the dead one handled."""
    fake, api = telegram
    shared_db.open().close()
    a = Node("gw-a", shared_db, api, fake.token)
    nodes = [a]
    try:
        assert a.next_state()[1] == "held"
        b = Node("gw-b", shared_db, api, fake.token)
        nodes.append(b)
        assert b.next_state()[1] == "standby"
        for n in range(5):
            fake.push_text(chat_id=42, user_id=42, text=f"before {n}")
        _read_got(a, lambda: len(a.got) == 5)
        _until_offset(shared_db, 6)  # a recorded them as handled (a kill in between: below)
        # a's next getUpdates (confirming the five) may not have happened yet: without
        # the stored offset b would fetch them again from Telegram
        a.stop(signal.SIGKILL)
        assert b.next_state(timeout=TTL_S + CHECK_S + 30)[1] == "held"
        for n in range(5):
            fake.push_text(chat_id=42, user_id=42, text=f"after {n}")
        _read_got(b, lambda: len(b.got) >= 5)
        assert a.got == [f"before {n}" for n in range(5)]
        assert b.got == [f"after {n}" for n in range(5)]  # none again, none skipped
        assert fake.overlaps == 0
    finally:
        for node in nodes:
            node.stop(signal.SIGKILL)


def _until_offset(db: SharedDb, offset: int, timeout: float = 30.0) -> None:
    """Wait until the stored Telegram offset is ``offset``. (A gateway killed after
    handing an update on and before recording it leaves it to be fetched again:
    docs/scaling.md, known limits.)"""
    from sqlalchemy import select

    from vikingbot.store.tables import channel_offsets

    store = db.open()
    try:
        deadline = time.monotonic() + timeout
        while True:
            with store.engine.connect() as conn:
                found = conn.execute(select(channel_offsets.c.next_update)).scalar()
            if found == offset:
                return
            assert time.monotonic() < deadline, f"stored offset {found}, not {offset}"
            time.sleep(0.05)
    finally:
        store.close()
