"""Agent I/O: pipes and devices refused without blocking, sizes capped, one turn's threads
bounded apart from everyone else's, and a wedged pool or turn named for /health."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from vikingbot import agentio
from vikingbot.errors import ToolError


def test_a_fifo_and_a_device_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="not a regular file"):
        agentio.read_capped(fifo, "pipe", 1000)
    with pytest.raises(ToolError, match="not a regular file"):
        agentio.read_capped(Path("/dev/zero"), "/dev/zero", 1000)
    assert time.monotonic() - t0 < 1.0


def test_a_file_over_the_cap_is_refused_naming_its_size(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 2001)
    with pytest.raises(ToolError, match=r"big\.txt is 2001 bytes, over the 2000-byte limit"):
        agentio.read_capped(big, "big.txt", 2000)
    assert agentio.read_capped(big, "big.txt", 2001) == b"x" * 2001


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_one_turn_holds_at_most_its_share_and_a_wedged_pool_is_named() -> None:
    release = threading.Event()
    started: list[int] = []

    def block(n: int) -> int:
        started.append(n)
        release.wait(30)
        return n

    hog = agentio.Lane()
    hogged = [asyncio.create_task(hog.run(block, n)) for n in range(10)]
    await until(lambda: len(started) >= agentio.PER_TURN)
    other = agentio.Lane()
    # the hog's ten calls hold PER_TURN threads; another turn still gets a thread at once
    assert await asyncio.wait_for(other.run(lambda: "free"), 5) == "free"
    assert len(started) == agentio.PER_TURN
    lanes = [agentio.Lane() for _ in range(agentio.THREADS)]
    rest = [asyncio.create_task(lane.run(block, 100 + i)) for i, lane in enumerate(lanes)]
    await until(lambda: len(started) >= agentio.THREADS)
    later = time.monotonic() + agentio.BUSY_AFTER_S + 1
    assert any("all 16 threads busy" in p for p in agentio.problems(later))
    release.set()
    assert sorted(await asyncio.gather(*hogged)) == list(range(10))
    await asyncio.gather(*rest)
    assert agentio.problems(later) == []


def test_a_turn_running_past_its_timeout_is_named() -> None:
    with agentio.running_turn("t-stuck", 1.0):
        now = time.monotonic()
        assert agentio.problems(now) == []
        late = agentio.problems(now + 1 + agentio.STUCK_GRACE_S + 5)
        assert late and late[0].startswith("turn t-stuck stuck")
    assert agentio.problems(now + 100) == []


def test_a_locked_edit_refuses_a_pipe_in_the_files_place(tmp_path: Path) -> None:
    """The write_file tool and the dashboard edit HEARTBEAT.md through locked_edit."""
    from vikingbot.fsutil import locked_edit

    fifo = tmp_path / "HEARTBEAT.md"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="not a regular file"):
        locked_edit(fifo, lambda text: text + "x", error=ToolError)
    assert time.monotonic() - t0 < 2
