"""vikingbot.proc: bounded children in their own process group, output capped, nothing left behind."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from vikingbot import proc
from vikingbot.errors import SpawnError

PY = sys.executable


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie left for init to reap counts as gone
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def gone(pid: int) -> bool:
    for _ in range(200):
        if not alive(pid):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_output_exit_status_and_stderr_tail_are_reported() -> None:
    done = await proc.run(
        [
            PY,
            "-c",
            "import sys; sys.stdout.write(sys.stdin.read().upper()); "
            "sys.stderr.write('x' * 100000 + 'THE END'); sys.exit(3)",
        ],
        input=b"hello",
        timeout_s=10,
    )
    assert (done.text, done.returncode, done.timed_out) == ("HELLO", 3, False)
    assert done.stderr_tail(7) == "THE END"
    assert len(done.stderr) <= proc.STDERR_KEEP


async def test_a_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    done = await proc.run(f"sleep 30 & echo $! > {pidfile}; sleep 30", timeout_s=0.3)
    assert done.timed_out and done.returncode is None
    assert time.monotonic() - t0 < 5
    assert await gone(int(pidfile.read_text()))


async def test_a_grandchild_holding_the_pipe_does_not_hold_the_caller(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    done = await proc.run(f"echo hi; sleep 30 & echo $! > {pidfile}", timeout_s=20)
    assert time.monotonic() - t0 < 5
    assert (done.returncode, done.text.strip()) == (0, "hi")
    assert await gone(int(pidfile.read_text()))


async def test_output_past_the_cap_is_counted_not_kept() -> None:
    done = await proc.run(
        [PY, "-c", "import sys; sys.stdout.write('a' * 3_000_000)"], timeout_s=20, max_output=1000
    )
    assert done.stdout == b"a" * 1000
    assert done.stdout_dropped == 3_000_000 - 1000


async def test_a_missing_program_is_a_spawn_error_naming_it() -> None:
    with pytest.raises(SpawnError, match="'no-such-program-vb' was not found") as info:
        await proc.run(["no-such-program-vb"], timeout_s=1)
    assert info.value.missing


async def test_cancelling_the_caller_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    task = asyncio.create_task(proc.run(f"echo $$ > {pidfile}; sleep 30", timeout_s=60))
    for _ in range(500):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(int(pidfile.read_text()))


async def test_stop_escalates_to_kill_when_term_is_ignored() -> None:
    child = await proc.start(
        [
            PY,
            "-c",
            "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(30)",
        ]
    )
    assert child.stdout is not None
    assert await child.stdout.readline() == b"ready\n"
    code = await proc.stop(child, grace_s=0.2)
    assert code == -signal.SIGKILL
    assert await gone(child.pid)
