"""Running a named checker for an ``only-if:`` entry, with its timeout and fail rule.

``parse_only_if`` refuses anything but ``NAME`` or ``NAME:SCOPE``: HEARTBEAT.md
is agent-writable, so it may only name checkers configured under
``bot.heartbeat.checkers``, never carry a command. ``run_check`` never raises
for a failing checker: a missing checker, missing secret, error or timeout
turns into a result that runs the entry anyway (``fail: open``, the default)
or skips it (``fail: closed``), with ``error`` saying why.
"""

from __future__ import annotations

import asyncio
import os
import re
import traceback
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from vikingbot.errors import CheckerError, VikingbotError
from vikingbot.heartbeat.checkers.base import Checker, CheckResult, cap_context, redact

if TYPE_CHECKING:
    from vikingbot.config.schema import CheckerConfig

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SCOPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+/#-]{0,199}")
_COMMANDISH = re.compile(r"[\s`$;|&<>'\"()\\*?!{}\[\]]")
_HINT = (
    "HEARTBEAT.md may only name a checker configured under bot.heartbeat.checkers "
    "(only-if: NAME or NAME:SCOPE), because the agent can write that file"
)


def parse_only_if(value: str) -> tuple[str, str | None]:
    """``"github:prs"`` -> ``("github", "prs")``; ``"backups"`` -> ``("backups", None)``.

    Raises CheckerError for anything else, in particular anything that looks
    like a command or a path.
    """
    text = value.strip()
    if not text:
        raise CheckerError(f"only-if: needs a checker name; {_HINT}")
    if _COMMANDISH.search(text) or text.startswith(("/", "~", ".", "-")):
        raise CheckerError(f"only-if: {value!r} looks like a raw command or path; {_HINT}")
    name, sep, scope = text.partition(":")
    if not _NAME.fullmatch(name):
        raise CheckerError(f"only-if: {value!r} does not start with a checker name; {_HINT}")
    if not sep:
        return name, None
    if not _SCOPE.fullmatch(scope) or ".." in scope:
        raise CheckerError(
            f"only-if: {value!r} has a malformed scope {scope!r} (letters, digits and "
            f"_ . @ + / # - only, no '..', not starting with a symbol); {_HINT}"
        )
    return name, scope


def build_checker(
    name: str,
    config: CheckerConfig,
    *,
    state_dir: Path,
    environ: Mapping[str, str] | None = None,
) -> Checker:
    """Load the checker's kind from the registry, construct it and validate its options."""
    from vikingbot import registry

    try:
        kind = registry.load("checkers", config.kind)
    except VikingbotError as exc:
        raise CheckerError(f"bot.heartbeat.checkers.{name}.kind: {exc}") from exc
    checker = kind(
        name, config, state_dir=state_dir, environ=os.environ if environ is None else environ
    )
    checker.validate()
    return checker


def validate_checkers(
    checkers: Mapping[str, CheckerConfig],
    *,
    state_dir: Path,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Problems with configured checkers, by name (empty when all are fine)."""
    problems: dict[str, str] = {}
    for name, config in checkers.items():
        try:
            build_checker(name, config, state_dir=state_dir, environ=environ)
        except CheckerError as exc:
            problems[name] = str(exc)
    return problems


def _failed(error: str, fail: str) -> CheckResult:
    if fail == "closed":
        return CheckResult(has_work=False, error=error)
    return CheckResult(has_work=True, error=error, failed_open=True)


async def run_check(
    name: str,
    scope: str | None,
    checkers: Mapping[str, CheckerConfig],
    *,
    state_dir: Path,
    environ: Mapping[str, str] | None = None,
) -> CheckResult:
    """Run the checker configured as ``name`` for ``scope``; never raises for its failures."""
    log = logger.bind(checker=name)
    config = checkers.get(name)
    if config is None:
        known = ", ".join(sorted(checkers)) or "none configured"
        error = (
            f"no checker named {name!r} in bot.heartbeat.checkers (known: {known}); "
            "running the entry as if there were work"
        )
        log.warning("checker failed open: {}", error)
        return _failed(error, "open")

    checker: Checker | None = None
    try:
        checker = build_checker(name, config, state_dir=state_dir, environ=environ)
        async with asyncio.timeout(config.timeout_s):  # not wait_for (3.11 can lose a cancel)
            result = await checker.check(scope)
        if result.error:
            raise CheckerError(result.error)
    except TimeoutError:
        error = f"checker {name!r} timed out after {config.timeout_s:g}s"
    except CheckerError as exc:
        error = str(exc)
    except Exception as exc:  # plugin code: a supervisor boundary
        secrets = checker.secrets if checker else set()
        detail = "".join(traceback.format_exception(exc))
        log.warning("checker {} crashed:\n{}", name, redact(detail, secrets))
        error = f"checker {name!r} crashed: {type(exc).__name__}: {exc}"
    else:
        secrets = checker.secrets
        result = replace(
            result,
            context=redact(cap_context(result.context), secrets),
            failed_open=False,
        )
        log.debug(
            "checker {} scope={} has_work={} signature={}",
            name,
            scope,
            result.has_work,
            result.signature,
        )
        return result

    error = redact(error, checker.secrets if checker else set()) or ""
    outcome = _failed(error, config.fail)
    log.warning(
        "checker {} scope={} failed {}: {}",
        name,
        scope,
        "open (entry runs)" if outcome.failed_open else "closed (entry skipped)",
        error,
    )
    return outcome
