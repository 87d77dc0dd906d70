"""The one way vikingbot runs another program: bounded, in its own process group.

Every child (the ``command`` provider, the ``command`` checker, the ``exec``
tool, an ACP agent) starts in a new session, so it and everything it starts
form one process group that is killed as a whole: on timeout, on cancel, and
(for ``run``) once the program itself has exited, so nothing it left behind
keeps running. Output is capped: ``stdout`` keeps its first ``max_output``
bytes, ``stderr`` its last ``STDERR_KEEP`` bytes (the end is what explains a
failure); how much was cut is reported, never hidden.

``run`` is for a program that answers and exits; ``start`` / ``stop`` are for
a long-lived child that speaks over its pipes (an ACP agent).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vikingbot.errors import SpawnError

STDERR_KEEP = 64 * 1024
_READ = 65536


@dataclass(frozen=True)
class Finished:
    """What came of one ``run``."""

    program: str
    returncode: int | None  # None: killed because it ran past the timeout
    stdout: bytes
    stderr: bytes
    stdout_dropped: int  # bytes of stdout past the cap, not kept
    timed_out: bool
    duration_s: float

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def stderr_tail(self, chars: int = 500) -> str:
        return self.stderr.decode("utf-8", "replace").strip()[-chars:]


def _describe(cmd: Sequence[str] | str) -> str:
    if isinstance(cmd, str):
        return cmd.split(maxsplit=1)[0] if cmd.strip() else "sh"
    return Path(cmd[0]).name if cmd else "?"


async def start(
    cmd: Sequence[str] | str,
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | None = asyncio.subprocess.PIPE,
    stderr: int | None = asyncio.subprocess.PIPE,
    limit: int = 2**16,
) -> asyncio.subprocess.Process:
    """Start ``cmd`` (argv, or a string for ``/bin/sh -c``) in its own process group.

    ``SpawnError`` (naming the program) when it cannot be started.
    """
    if not isinstance(cmd, str) and (not cmd or not cmd[0]):
        raise SpawnError("no program to run (empty command)", program="", missing=True)
    common = {
        "stdin": stdin,
        "stdout": asyncio.subprocess.PIPE,
        "stderr": stderr,
        "cwd": str(cwd) if cwd is not None else None,
        "env": dict(env) if env is not None else None,
        "start_new_session": True,
        "limit": limit,
    }
    if isinstance(cmd, str):
        spawning = asyncio.ensure_future(asyncio.create_subprocess_shell(cmd, **common))  # type: ignore[arg-type]
    else:
        spawning = asyncio.ensure_future(asyncio.create_subprocess_exec(*cmd, **common))  # type: ignore[arg-type]
    try:
        # shielded: a cancel while asyncio wires up the pipes must still kill the whole group
        return await asyncio.shield(spawning)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            child = await spawning
            kill_group(child)
            await _reap(child, None, None, None)
        raise
    except FileNotFoundError as exc:
        name = cmd if isinstance(cmd, str) else cmd[0]
        where = f" (or the folder {cwd} is missing)" if cwd is not None else ""
        raise SpawnError(
            f"the program {name!r} was not found{where}", program=name, missing=True
        ) from exc
    except PermissionError as exc:
        name = cmd if isinstance(cmd, str) else cmd[0]
        raise SpawnError(f"the program {name!r} is not executable", program=name) from exc
    except OSError as exc:
        name = cmd if isinstance(cmd, str) else cmd[0]
        raise SpawnError(f"cannot start {name!r}: {exc}", program=name) from exc


def which(program: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Where ``program`` is (``~`` expanded; a bare name searched on ``PATH``), or None."""
    import shutil

    program = os.path.expanduser(program)
    path = (environ or os.environ).get("PATH")
    if os.sep in program:
        return program if os.access(program, os.X_OK) and os.path.isfile(program) else None
    return shutil.which(program, path=path)


def kill_group(proc: asyncio.subprocess.Process, sig: int = signal.SIGKILL) -> None:
    """Signal the child's whole process group (the child and all it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


async def exited(proc: asyncio.subprocess.Process) -> int:
    """Wait until the child itself exits.

    ``Process.wait()`` also waits for every copy of its pipes to close, which a
    grandchild left running can hold open for ever; this returns when the
    child is gone either way.
    """
    waiter = asyncio.ensure_future(proc.wait())
    delay = 0.01
    try:
        while proc.returncode is None and not waiter.done():
            await asyncio.wait({waiter}, timeout=delay)
            delay = min(delay * 2, 0.1)
    finally:
        if not waiter.done():
            waiter.cancel()
    assert proc.returncode is not None
    return proc.returncode


async def stop(proc: asyncio.subprocess.Process, grace_s: float = 2.0) -> int | None:
    """End a long-lived child: close its stdin, SIGTERM the group, SIGKILL after ``grace_s``."""
    if proc.stdin is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()
    if proc.returncode is None:
        kill_group(proc, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(exited(proc), grace_s)
    kill_group(proc)  # whatever it left running goes too
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(exited(proc), grace_s)
    return proc.returncode


async def _read_head(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, int]:
    kept = bytearray()
    dropped = 0
    while chunk := await stream.read(_READ):
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        dropped += max(0, len(chunk) - max(room, 0))
    return bytes(kept), dropped


async def _read_tail(stream: asyncio.StreamReader, keep: int) -> bytes:
    tail = bytearray()
    while chunk := await stream.read(_READ):
        tail += chunk
        if len(tail) > 2 * keep:
            del tail[:-keep]
    return bytes(tail[-keep:])


async def run(
    cmd: Sequence[str] | str,
    *,
    timeout_s: float,
    input: bytes | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    max_output: int = 1_000_000,
    merge_stderr: bool = False,
) -> Finished:
    """Run ``cmd`` to its end, or kill its group after ``timeout_s``.

    ``input`` is written to its stdin (else stdin is ``/dev/null``);
    ``merge_stderr`` sends stderr into stdout (one capped stream). A cancelled
    caller kills the group before the cancel goes on. ``SpawnError`` when the
    program cannot be started; any exit status is reported, not raised.
    """
    t0 = time.monotonic()
    proc = await start(
        cmd,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    out_task = asyncio.ensure_future(_read_head(proc.stdout, max_output))
    err_task = (
        asyncio.ensure_future(_read_tail(proc.stderr, STDERR_KEEP))
        if proc.stderr is not None
        else None
    )
    feeder = asyncio.ensure_future(_feed(proc, input)) if input is not None else None
    timed_out = False
    try:
        await asyncio.wait_for(exited(proc), timeout_s)
    except TimeoutError:
        timed_out = True
    except asyncio.CancelledError:
        kill_group(proc)
        await _reap(proc, out_task, err_task, feeder)
        raise
    kill_group(proc)  # on timeout or after a normal exit: nothing stays behind
    out, dropped, err = await _reap(proc, out_task, err_task, feeder)
    return Finished(
        program=_describe(cmd),
        returncode=None if timed_out else proc.returncode,
        stdout=out,
        stderr=err,
        stdout_dropped=dropped,
        timed_out=timed_out,
        duration_s=time.monotonic() - t0,
    )


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()


async def _reap(
    proc: asyncio.subprocess.Process,
    out_task: asyncio.Future[tuple[bytes, int]] | None,
    err_task: asyncio.Future[bytes] | None,
    feeder: asyncio.Future[None] | None,
) -> tuple[bytes, int, bytes]:
    """Collect the output of a killed or exited child and close its pipes."""
    if feeder is not None:
        feeder.cancel()
    if proc.stdin is not None:
        proc.stdin.close()
    readers: list[asyncio.Future[Any]] = [t for t in (out_task, err_task) if t is not None]
    if not readers:  # nobody read yet: drain the pipes so they close
        readers = [asyncio.ensure_future(_read_head(s, 0)) for s in (proc.stdout, proc.stderr) if s]
    done: set[asyncio.Future[Any]] = set()
    pending: set[asyncio.Future[Any]] = set()
    if readers:
        done, pending = await asyncio.wait(readers, timeout=5)
    for task in pending:  # a process outside the group holds the pipe open
        task.cancel()
    out, dropped = out_task.result() if out_task is not None and out_task in done else (b"", 0)
    err = err_task.result() if err_task is not None and err_task in done else b""
    # proc.wait() returns once the pipes are closed too: the transport is then closed
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait() if not pending else exited(proc), 5)
    return out, dropped, err
