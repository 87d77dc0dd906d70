"""Start ``vikingbot`` in the tests from a process that has already imported it.

A ``vikingbot gateway`` process spends most of its start importing: openai alone
is ~0.75 s of CPU, telegram and aiohttp ~0.5 s more, and the suite starts about
fifty gateways, forty CLI commands and twenty chats on a two-core machine
(bench/gateway_start.py). This module runs
one helper process per test process (the *fork server*) that imports the
gateway's modules once and, for each start, forks a child that runs the very
same entry point a real start runs (``python -m vikingbot ...``: the
``vikingbot`` package's ``__main__`` through :mod:`runpy`), with the caller's
argv, environment, working folder and open files for stdin, stdout and stderr.

What differs from a fresh interpreter, and why it does not matter here:

- the modules are imported already (the state they build at import reads no
  environment: nothing in vikingbot does; the SDKs read theirs when a client is
  made, after the fork);
- ``sys.stdin``/``sys.stdout``/``sys.stderr`` are made again over the new file
  descriptors, as the interpreter would (``PYTHONUNBUFFERED`` honoured);
- on exit the child runs what the interpreter runs (non-daemon threads joined,
  ``atexit`` handlers, streams flushed) and leaves with ``os._exit``;
- the children share the server's string-hash seed (no test may depend on one);
- ``ps`` shows a child under the server's command line (a fork keeps its argv).

Starts whose environment changes how Python itself starts (any ``PYTHON*``
variable other than ``PYTHONUNBUFFERED`` differing from those the server started
with, such as a ``PYTHONPATH`` with a ``sitecustomize``) are not forked:
:func:`spawn` runs them with :class:`subprocess.Popen` as before. So do the
process-level tests (``tests/gateway/test_gateway_process.py``,
``tests/cli/test_status_fast.py``), and everything outside the test
suite (only ``tests/conftest.py`` sets ``VIKINGBOT_TEST_FORK=1``): a real start
stays tested, and every bench measures real starts.

The caller's side (:class:`Forked`) offers what the tests use of
:class:`subprocess.Popen`: ``pid``, ``poll``, ``wait``, ``send_signal``,
``terminate``, ``kill``, ``returncode``. The child is the fork server's child:
signals go to it directly by pid; its exit status comes back over the socket.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# What a gateway with the e2e tests' config imports before it is ready: the
# heaviest first. A missing optional package is left out.
PRELOAD = (
    "openai",
    "telegram",
    "telegram.ext",
    "aiohttp",
    "httpx",
    "sqlalchemy",
    "sqlalchemy.dialects.sqlite",
    "uvicorn",
    "starlette.applications",
    "pydantic",
    "pydantic_settings",
    "typer",
    "rich.console",
    "loguru",
    "vikingbot.cli.app",
    "vikingbot.gateway.supervisor",
    "vikingbot.gateway.compose",
    "vikingbot.gateway.server",
)
MAX_MESSAGE = 1 << 20


_REPO = Path(__file__).resolve().parents[2]


def _python_vars(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that change how Python starts (``PYTHONUNBUFFERED`` is honoured
    in the child)."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k != "PYTHONUNBUFFERED"}


def wanted(env: dict[str, str]) -> bool:
    """Whether a start with this environment is forked: the suite asked for it, and
    nothing in ``env`` changes how Python starts from what the server started with."""
    if os.environ.get("VIKINGBOT_TEST_FORK") != "1" or not hasattr(os, "pidfd_open"):
        return False
    with _client_lock:  # the server started with the environment of that moment
        started = _client.python_vars if _client is not None else _python_vars(os.environ)
    return _python_vars(env) == started


class Forked:
    """A child of the fork server, seen through the part of Popen's API tests use."""

    def __init__(self, server: _Client, pid: int, args: list[str]) -> None:
        self._server, self.pid, self.args = server, pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.status(self.pid, 0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.status(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Client:
    """This process's connection to its fork server (started on first use)."""

    def __init__(self) -> None:
        self.python_vars = _python_vars(os.environ)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.forkserver", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            cwd=_REPO,  # where ``-m tests.support...`` is found
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self._sock = mine
        self._lock = threading.Lock()
        self._exits: dict[int, int] = {}
        self._started: dict[int, int | str] = {}
        self._next = 0
        atexit.register(self.close)
        hello = self._receive(120.0)
        if hello is None or hello.get("op") != "ready":
            raise RuntimeError(f"the fork server did not start: {hello!r}")

    def close(self) -> None:
        """Hang up: the server exits (children it started live on, as after a Popen)."""
        self._sock.close()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def _receive(self, timeout: float | None) -> dict[str, Any] | None:
        self._sock.settimeout(timeout)
        try:
            data = self._sock.recv(MAX_MESSAGE)
        except (TimeoutError, BlockingIOError):
            return None
        if not data:
            raise RuntimeError("the fork server exited")
        message: dict[str, Any] = json.loads(data)
        return message

    def _pump(self, timeout: float | None) -> None:
        """File the messages that came (waiting up to ``timeout`` for the first); the
        lock is held."""
        message = self._receive(timeout)
        while message is not None:
            if message["op"] == "exit":
                self._exits[message["pid"]] = message["returncode"]
            elif message["op"] == "started":
                self._started[message["id"]] = message.get("pid") or message["error"]
            message = self._receive(0.0)

    def start(
        self, argv: list[str], env: dict[str, str], cwd: str, fds: list[int], tty: bool = False
    ) -> int:
        with self._lock:
            self._next += 1
            ident = self._next
            request = {
                "op": "start",
                "id": ident,
                "argv": argv,
                "env": env,
                "cwd": cwd,
                "tty": tty,
            }
            socket.send_fds(self._sock, [json.dumps(request).encode()], fds)
            while ident not in self._started:
                self._pump(None)
            pid = self._started.pop(ident)
        if isinstance(pid, str):
            raise OSError(pid)
        return pid

    def status(self, pid: int, timeout: float | None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if pid in self._exits:
                    return self._exits.pop(pid)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    self._pump(0.0)
                    return self._exits.pop(pid, None)
                self._pump(0.05 if left is None else min(left, 0.05))


_client: _Client | None = None
_client_lock = threading.Lock()


def spawn(
    argv: list[str],
    *,
    env: dict[str, str],
    stdout: Any,
    stderr: Any = subprocess.STDOUT,
    fork: bool = True,
) -> subprocess.Popen[str] | Forked:
    """``python -m vikingbot *argv`` with ``env``, stdout to the file ``stdout`` (and
    stderr to it too, or to ``stderr``): forked from the fork server when it can be,
    else a real :class:`subprocess.Popen`."""
    if not (fork and wanted(env)):
        return subprocess.Popen(
            _command(argv),
            env=env,
            stdout=stdout,
            stderr=stderr,
            text=True,
        )
    client = _connect()
    err = stdout if stderr is subprocess.STDOUT else stderr
    with open(os.devnull, "rb") as null:
        fds = [null.fileno(), stdout.fileno(), err.fileno()]
        pid = client.start(argv, env, os.getcwd(), fds)
    return Forked(client, pid, _command(argv))


def spawn_on_terminal(argv: list[str], *, env: dict[str, str], terminal: int) -> Forked:
    """``python -m vikingbot *argv`` forked onto the pseudo-terminal whose other end
    is ``terminal`` (stdin, stdout and stderr), in a session of its own with that
    terminal as its controlling one, as ``pexpect.spawn`` starts a program: Ctrl-C
    typed there is a SIGINT. The caller checks :func:`wanted` first."""
    client = _connect()
    pid = client.start(argv, env, os.getcwd(), [terminal, terminal, terminal], tty=True)
    return Forked(client, pid, _command(argv))


def _command(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "vikingbot", *argv]


def _connect() -> _Client:
    global _client
    with _client_lock:
        if _client is None or _client._proc.poll() is not None:
            _client = _Client()
        return _client


def run(
    argv: list[str], *, env: dict[str, str], timeout: float, fork: bool = True
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, -m, vikingbot, *argv], capture_output=True, text=True)``,
    forked when it can be (see :func:`spawn`)."""
    args = _command(argv)
    if not (fork and wanted(env)):
        return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    with open(out_w, "wb") as out, open(err_w, "wb") as err:
        proc = spawn(argv, env=env, stdout=out, stderr=err)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            ready = sel.select(max(left, 0.0))
            if not ready and left <= 0:
                proc.kill()
                proc.wait()
                for fd in chunks:
                    os.close(fd)
                raise subprocess.TimeoutExpired(args, timeout)
            for key, _ in ready:
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
    code = proc.wait(max(deadline - time.monotonic(), 0.0) + 5.0)
    # decoded as Popen's text mode does (locale encoding, universal newlines)
    out_s, err_s = (
        io.TextIOWrapper(io.BytesIO(b"".join(chunks[fd]))).read() for fd in (out_r, err_r)
    )
    return subprocess.CompletedProcess(args, code, out_s, err_s)


# ----------------------------------------------------------------- the server


def _serve(sock: socket.socket) -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    if threading.active_count() != 1:  # forking a threaded process is not safe
        sock.send(json.dumps({"op": "refused", "why": "threads after preload"}).encode())
        return
    sock.send(json.dumps({"op": "ready"}).encode())
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ, None)
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        for key, _ in sel.select():
            if key.data is None:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 3)
                except OSError:
                    data = b""
                if not data:
                    return  # our test process is gone
                request = json.loads(data)
                try:
                    pid = os.fork()
                except OSError as exc:
                    for fd in fds:
                        os.close(fd)
                    answer = {"op": "started", "id": request["id"], "error": str(exc)}
                    sock.send(json.dumps(answer).encode())
                    continue
                if pid == 0:
                    sel.close()
                    for fd in children:
                        os.close(fd)
                    sock.close()
                    _child(request, fds)  # never returns
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = pid
                sel.register(pidfd, selectors.EVENT_READ, pid)
                sock.send(json.dumps({"op": "started", "id": request["id"], "pid": pid}).encode())
            else:
                pidfd, pid = key.fd, key.data
                sel.unregister(pidfd)
                os.close(pidfd)
                children.pop(pidfd, None)
                _, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                sock.send(json.dumps({"op": "exit", "pid": pid, "returncode": code}).encode())


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """Become ``python -m vikingbot *argv``; leaves with the exit code, never returns."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        if request.get("tty"):
            import fcntl
            import termios

            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _new_streams(bool(os.environ.get("PYTHONUNBUFFERED")))
        code = _run_main(request["argv"])
    finally:
        os._exit(code)


def _new_streams(unbuffered: bool) -> None:
    """sys.stdin/stdout/stderr over fds 0-2, made as the interpreter makes them."""

    def stream(fd: int, old: Any, mode: str) -> io.TextIOWrapper:
        raw = io.FileIO(fd, mode, closefd=False)
        tty = raw.isatty()
        buffered: Any
        if mode == "r":
            buffered = io.BufferedReader(raw)
        elif unbuffered:
            buffered = raw
        else:
            buffered = io.BufferedWriter(raw)
        return io.TextIOWrapper(
            buffered,
            encoding=old.encoding,
            errors=old.errors,
            line_buffering=tty and mode == "w",
            write_through=unbuffered and mode == "w",
        )

    sys.stdin = sys.__stdin__ = stream(0, sys.__stdin__, "r")  # type: ignore[misc]
    sys.stdout = sys.__stdout__ = stream(1, sys.__stdout__, "w")  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = stream(2, sys.__stderr__, "w")  # type: ignore[misc]


def _run_main(argv: list[str]) -> int:
    import runpy
    import traceback

    sys.argv = ["-m", *argv]
    code: int = 0
    try:
        runpy.run_module("vikingbot", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for s in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            s.flush()
    return code


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])))
