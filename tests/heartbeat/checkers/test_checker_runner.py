"""``run_check``: the fail rule, missing checkers, timeouts, context caps, registry lookup."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from vikingbot.config.schema import CheckerConfig
from vikingbot.heartbeat.checkers import build_checker, run_check, validate_checkers
from vikingbot.heartbeat.checkers.base import CONTEXT_CAP
from vikingbot.heartbeat.checkers.command import CommandChecker

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def py(code: str, **options: object) -> CheckerConfig:
    return CheckerConfig.model_validate(
        {"kind": "command", "command": [sys.executable, "-c", code], **options}
    )


async def test_a_missing_checker_fails_open_and_says_which(tmp_path: Path, log_lines) -> None:
    checkers = {"gitlab": CheckerConfig(kind="gitlab"), "mail": py("print(1)")}
    result = await run_check("gitlabb", "mr", checkers, state_dir=tmp_path, environ={})
    assert result.has_work and result.failed_open
    assert result.signature is None
    error = result.error or ""
    assert "no checker named 'gitlabb'" in error
    assert "gitlab, mail" in error
    assert any("gitlabb" in line and "'checker': 'gitlabb'" in line for line in log_lines)


async def test_an_unknown_kind_fails_open_naming_the_config_key(run) -> None:
    result = await run(CheckerConfig(kind="carrier-pigeon"), name="birds")
    assert result.failed_open
    error = result.error or ""
    assert "bot.heartbeat.checkers.birds.kind" in error
    assert "carrier-pigeon" in error


async def test_an_unknown_kind_with_fail_closed_skips(run) -> None:
    result = await run(CheckerConfig(kind="carrier-pigeon", fail="closed"))
    assert not result.has_work and not result.failed_open
    assert result.error


async def test_a_timeout_fails_open_then_closed(run) -> None:
    slow = "import time; time.sleep(20)"
    opened = await run(py(slow, timeoutS=0.5), environ=ENV)
    closed = await run(py(slow, timeoutS=0.5, fail="closed"), environ=ENV)
    assert opened.has_work and opened.failed_open and "timed out" in (opened.error or "")
    assert not closed.has_work and not closed.failed_open and "timed out" in (closed.error or "")


async def test_success_is_never_marked_failed_open(run) -> None:
    result = await run(py("print('news')", fail="closed"), environ=ENV)
    assert result.has_work and not result.failed_open and result.error is None


async def test_context_is_capped(run) -> None:
    result = await run(py("print('x' * 20000)"), environ=ENV)
    assert result.context is not None
    assert len(result.context) <= CONTEXT_CAP
    assert "truncated" in result.context
    # the signature still covers all of the output
    other = await run(py("print('x' * 19999)"), environ=ENV)
    assert other.signature != result.signature


def test_kinds_come_from_the_registry(tmp_path: Path) -> None:
    config = CheckerConfig.model_validate({"kind": "command", "command": ["true"]})
    built = build_checker("c", config, state_dir=tmp_path, environ={})
    assert isinstance(built, CommandChecker)


def test_validate_checkers_lists_every_problem(tmp_path: Path) -> None:
    checkers = {
        "ok": CheckerConfig.model_validate({"kind": "command", "command": ["true"]}),
        "typo": CheckerConfig.model_validate({"kind": "file", "paht": "~/x"}),
        "rel": CheckerConfig.model_validate({"kind": "file", "path": "notes/*.md"}),
        "web": CheckerConfig.model_validate({"kind": "http", "url": "ftp://x"}),
    }
    problems = validate_checkers(checkers, state_dir=tmp_path, environ={})
    assert set(problems) == {"typo", "rel", "web"}
    assert "unknown option 'paht'" in problems["typo"]
    assert "is relative" in problems["rel"]
    assert "http:// or https://" in problems["web"]
