"""`vikingbot chat` in a pseudo-terminal, for the interactive chat's tests and bench.

``Terminal.start(home)`` runs ``python -m vikingbot chat`` on a pty (pexpect, a dev dependency), as
a user's terminal would; ``wait_for(pattern)`` waits (with a timeout, never a
sleep) until the screen text, escape codes removed, matches.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import struct
import sys
import termios
import time
from pathlib import Path

import pexpect
from pexpect import fdpexpect

from tests.support import forkserver

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\x1b\][^\x07]*\x07|\r")
UP, LEFT = "\x1b[A", "\x1b[D"
TIMEOUT_S = 60.0
ROWS_COLS = (40, 120)


class _ForkedChat(fdpexpect.fdspawn):
    """The chat forked from the tests' fork server onto a new pty
    (``tests.support.forkserver``), with what :class:`Terminal` uses of
    ``pexpect.spawn``: the pty's keys and screen, Ctrl-C and Ctrl-D typed as
    characters (the terminal makes them a signal and an end of input), the exit."""

    @classmethod
    def start(cls, argv: list[str], env: dict[str, str]) -> _ForkedChat:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *ROWS_COLS, 0, 0))
        try:
            proc = forkserver.spawn_on_terminal(argv, env=env, terminal=slave)
        finally:
            os.close(slave)
        child = cls(
            master, encoding="utf-8", codec_errors="replace", timeout=TIMEOUT_S, use_poll=True
        )
        child.proc = proc
        return child

    proc: forkserver.Forked

    def isalive(self) -> bool:
        code = self.proc.poll()
        if code is None:
            return True
        self.exitstatus = code if code >= 0 else None  # pexpect: None after a signal
        return False

    def sendintr(self) -> None:
        self.send(chr(termios.tcgetattr(self.child_fd)[6][termios.VINTR][0]))

    def sendeof(self) -> None:
        self.send(chr(termios.tcgetattr(self.child_fd)[6][termios.VEOF][0]))

    def terminate(self, force: bool = False) -> bool:
        self.proc.kill() if force else self.proc.terminate()
        with contextlib.suppress(Exception):
            self.proc.wait(10)
        return True

    def close(self, force: bool = True) -> None:
        with contextlib.suppress(Exception):
            self.proc.wait(TIMEOUT_S)
        self.isalive()
        super().close()


class Terminal:
    def __init__(self, child: pexpect.spawn | _ForkedChat) -> None:
        self.child = child
        self.raw = ""

    @classmethod
    def start(cls, home: Path, *args: str) -> Terminal:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
        env.update(
            VIKINGBOT_HOME=str(home),
            TERM="xterm-256color",
            # prompt_toolkit asks the terminal where the cursor is; a pty has nobody to answer
            PROMPT_TOOLKIT_NO_CPR="1",
        )
        for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "COLUMNS", "LINES", "NO_COLOR"):
            env.pop(var, None)
        if forkserver.wanted(env):
            return cls(_ForkedChat.start(["chat", *args], env))
        child = pexpect.spawn(
            sys.executable,
            ["-m", "vikingbot", "chat", *args],
            env=env,
            encoding="utf-8",
            codec_errors="replace",
            dimensions=ROWS_COLS,
            timeout=TIMEOUT_S,
        )
        return cls(child)

    @property
    def text(self) -> str:
        """Everything shown so far, without escape codes."""
        return ANSI.sub("", self.raw)

    def _pump(self, wait_s: float) -> None:
        with contextlib.suppress(pexpect.TIMEOUT):
            self.raw += self.child.read_nonblocking(65536, timeout=wait_s)

    def wait_for(
        self, pattern: str, *, after: int = 0, timeout: float = TIMEOUT_S
    ) -> re.Match[str]:
        """The first match of ``pattern`` in the screen text from offset ``after``."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            found = rx.search(self.text, after)
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout:g}s waiting for {pattern!r}; screen:\n"
                    f"{self.text[-3000:]}"
                )
            try:
                self._pump(0.2)
            except pexpect.EOF:
                raise AssertionError(
                    f"chat exited waiting for {pattern!r}; screen:\n{self.text[-3000:]}"
                ) from None

    def prompt(self, after: int = 0) -> int:
        """Wait for the `you›` prompt and for the keyboard to be the prompt's (the pty
        out of line mode, as prompt_toolkit sets it); the screen offset just after it."""
        end = self.wait_for(r"you› ", after=after).end()
        self.wait_raw()
        return end

    def wait_raw(self, timeout: float = TIMEOUT_S) -> None:
        """Wait until the program reads keys one by one (ICANON off)."""
        deadline = time.monotonic() + timeout
        while termios.tcgetattr(self.child.child_fd)[3] & termios.ICANON:
            if time.monotonic() > deadline:
                raise AssertionError(f"the prompt never took the keyboard:\n{self.text[-3000:]}")
            self._pump(0.05)

    def wait_cooked(self, timeout: float = TIMEOUT_S) -> None:
        """Wait until the terminal is back in line mode (a turn is running: Ctrl-C is a signal)."""
        deadline = time.monotonic() + timeout
        while not termios.tcgetattr(self.child.child_fd)[3] & termios.ICANON:
            if time.monotonic() > deadline:
                raise AssertionError(f"the terminal stayed raw:\n{self.text[-3000:]}")
            self._pump(0.05)

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def line(self, text: str) -> None:
        self.child.send(text + "\r")

    def ctrl_c(self) -> None:
        self.child.sendintr()

    def ctrl_d(self) -> None:
        self.child.sendeof()

    def wait_exit(self, timeout: float = TIMEOUT_S) -> int:
        deadline = time.monotonic() + timeout
        while self.child.isalive():
            if time.monotonic() > deadline:
                raise AssertionError(f"chat did not exit; screen:\n{self.text[-3000:]}")
            try:
                self._pump(0.2)
            except pexpect.EOF:
                break
        self.child.close()
        return int(self.child.exitstatus if self.child.exitstatus is not None else -1)

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
