"""The ``command`` checker: run a configured program; non-empty stdout is work.

Options: ``command`` (argv list, run without a shell), optional ``cwd``,
``env`` (values may use ``${NAME}``; those, and values of variables named
like secrets, are redacted from results) and ``ok_exit_codes`` (default ``[0]``).
The scope is passed as ``VIKINGBOT_SCOPE`` and replaces ``{scope}`` in argv.
On timeout the whole process group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from vikingbot.errors import CheckerError
from vikingbot.heartbeat.checkers.base import (
    Checker,
    CheckResult,
    looks_secret,
    signature_of,
    substitute_scope,
)

_STDERR_TAIL = 500


class CommandChecker(Checker):
    kind = "command"
    options = frozenset({"command", "cwd", "env", "ok_exit_codes"})

    def validate(self) -> None:
        super().validate()
        argv = self.opt_str_list("command")
        if not argv:
            raise CheckerError(
                f"{self.where}.command: expected a non-empty argv list, "
                'e.g. ["git", "-C", "~/repo", "status", "--porcelain"]'
            )
        self.opt_str("cwd")
        self.opt_str_map("env")
        codes = self.opts.get("ok_exit_codes", [0])
        if not isinstance(codes, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) for c in codes
        ):
            raise CheckerError(f"{self.where}.ok_exit_codes: expected a list of integers")

    def _argv(self, scope: str | None) -> list[str]:
        argv = self.opt_str_list("command") or []
        return [substitute_scope(arg, scope, where=f"{self.where}.command") for arg in argv]

    def _env(self, scope: str | None) -> dict[str, str]:
        env = dict(self.environ)
        for key, value in self.opt_str_map("env").items():
            env[key] = self.resolve(value, what=f"env {key}")
            if looks_secret(key):
                self.secrets.add(env[key])
        if scope:
            env["VIKINGBOT_SCOPE"] = scope
        else:
            env.pop("VIKINGBOT_SCOPE", None)
        return env

    async def check(self, scope: str | None) -> CheckResult:
        argv = self._argv(scope)
        env = self._env(scope)
        cwd = self.opt_str("cwd") or None
        if cwd:
            cwd = str(Path(cwd).expanduser())
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise CheckerError(f"{self.where}: cannot start {argv[0]!r}: {exc}") from exc
        try:
            stdout, stderr = await asyncio.wait_for(
                proc.communicate(), timeout=self.config.timeout_s
            )
        except TimeoutError:
            raise CheckerError(
                f"{self.where}: command timed out after {self.config.timeout_s:g}s"
            ) from None
        finally:
            if proc.returncode is None:
                await _kill(proc)

        ok = self.opts.get("ok_exit_codes", [0])
        if proc.returncode not in ok:
            tail = stderr.decode("utf-8", "replace").strip()[-_STDERR_TAIL:]
            raise CheckerError(
                f"{self.where}: {argv[0]!r} exited with status {proc.returncode}"
                + (f": {tail}" if tail else "")
            )
        text = stdout.decode("utf-8", "replace")
        if not text.strip():
            return CheckResult(has_work=False, signature=signature_of(b""))
        return CheckResult(has_work=True, signature=signature_of(stdout), context=text)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """Kill the command and everything it started, then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
    with contextlib.suppress(ProcessLookupError):
        await proc.wait()
