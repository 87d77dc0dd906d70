"""The ``command`` checker: run a configured program; non-empty stdout is work.

Options: ``command`` (argv list, run without a shell), optional ``cwd``,
``env`` (values may use ``${NAME}``; those, and values of variables named
like secrets, are redacted from results) and ``ok_exit_codes`` (default ``[0]``).
The scope is passed as ``VIKINGBOT_SCOPE`` and replaces ``{scope}`` in argv.
It runs through ``vikingbot.proc``: on timeout the whole process group is
killed; stdout past 1 MB is not kept.
"""

from __future__ import annotations

from pathlib import Path

from vikingbot import proc
from vikingbot.errors import CheckerError, SpawnError
from vikingbot.heartbeat.checkers.base import (
    Checker,
    CheckResult,
    looks_secret,
    signature_of,
    substitute_scope,
)

_STDERR_TAIL = 500
_MAX_OUTPUT = 1_000_000  # stdout kept for the signature and the prompt context


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
            done = await proc.run(
                argv, cwd=cwd, env=env, timeout_s=self.config.timeout_s, max_output=_MAX_OUTPUT
            )
        except SpawnError as exc:
            raise CheckerError(f"{self.where}: cannot start {argv[0]!r}: {exc}") from exc
        if done.timed_out:
            raise CheckerError(f"{self.where}: command timed out after {self.config.timeout_s:g}s")
        ok = self.opts.get("ok_exit_codes", [0])
        if done.returncode not in ok:
            tail = done.stderr_tail(_STDERR_TAIL)
            raise CheckerError(
                f"{self.where}: {argv[0]!r} exited with status {done.returncode}"
                + (f": {tail}" if tail else "")
            )
        stdout = done.stdout
        text = done.text
        if not text.strip():
            return CheckResult(has_work=False, signature=signature_of(b""))
        return CheckResult(has_work=True, signature=signature_of(stdout), context=text)
