"""The ``command`` checker, run for real: stdout is work, its hash the signature."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vikingbot.config.schema import CheckerConfig

PY = sys.executable
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def cmd(*argv: str, **options: Any) -> CheckerConfig:
    return CheckerConfig.model_validate({"kind": "command", "command": list(argv), **options})


def py(code: str, **options: Any) -> CheckerConfig:
    return cmd(PY, "-c", code, **options)


async def test_output_is_work_and_becomes_context(run) -> None:
    result = await run(py("print('2 new invoices')"), environ=ENV)
    assert result.has_work
    assert result.context == "2 new invoices"
    assert result.error is None and not result.failed_open
    assert result.signature and len(result.signature) == 32


async def test_no_output_is_no_work(run) -> None:
    result = await run(py("print('   ')"), environ=ENV)
    assert not result.has_work
    assert result.error is None


async def test_signature_follows_the_output(run, tmp_path: Path) -> None:
    news = tmp_path / "news.txt"
    news.write_text("one\n")
    config = cmd("cat", str(news))
    first = await run(config, environ=ENV)
    again = await run(config, environ=ENV)
    news.write_text("one\ntwo\n")
    changed = await run(config, environ=ENV)
    assert first.signature == again.signature
    assert changed.signature != first.signature


async def test_a_failing_command_fails_open_with_its_stderr(run) -> None:
    result = await run(py("import sys; sys.exit('token expired')"), environ=ENV)
    assert result.has_work and result.failed_open
    assert "status 1" in (result.error or "")
    assert "token expired" in (result.error or "")


async def test_fail_closed_skips_the_entry_on_failure(run) -> None:
    result = await run(py("raise SystemExit(3)", fail="closed"), environ=ENV)
    assert not result.has_work
    assert not result.failed_open
    assert "status 3" in (result.error or "")


async def test_ok_exit_codes_let_grep_say_no_match(run, tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("all fine\n")
    config = cmd("grep", "ERROR", str(log), okExitCodes=[0, 1])
    quiet = await run(config, environ=ENV)
    log.write_text("all fine\nERROR disk full\n")
    noisy = await run(config, environ=ENV)
    assert not quiet.has_work and quiet.error is None
    assert noisy.has_work and noisy.context == "ERROR disk full"


async def test_scope_reaches_the_command_as_env_and_argument(run) -> None:
    code = "import os, sys; print(os.environ['VIKINGBOT_SCOPE'], sys.argv[1])"
    result = await run(py(code, command=[PY, "-c", code, "repo={scope}"]), "octo/app", ENV)
    assert result.context == "octo/app repo=octo/app"


async def test_a_placeholder_without_scope_is_an_error(run) -> None:
    result = await run(cmd("echo", "{scope}"), environ=ENV)
    assert result.failed_open
    assert "only-if: NAME:SCOPE" in (result.error or "")


async def test_cwd_option(run, tmp_path: Path) -> None:
    result = await run(py("import os; print(os.getcwd())", cwd=str(tmp_path)), environ=ENV)
    assert result.context == str(tmp_path)


async def test_env_references_reach_the_command_but_never_the_agent(run) -> None:
    code = "import os; print('using key', os.environ['MAIL_KEY'])"
    config = py(code, env={"MAIL_KEY": "${VIKINGBOT_TEST_MAIL_KEY}"})
    result = await run(config, environ={**ENV, "VIKINGBOT_TEST_MAIL_KEY": "s3cret-mail-key"})
    assert result.has_work
    assert result.context == "using key ***"


async def test_secret_looking_env_values_are_redacted_even_when_written_out(run) -> None:
    # the config loader may already have expanded ${...}: the name still marks it secret
    code = "import os; print(os.environ['MAIL_KEY'], os.environ['REPORT'])"
    config = py(code, env={"MAIL_KEY": "s3cret-mail-key", "REPORT": "weekly"})
    result = await run(config, environ=ENV)
    assert result.context == "*** weekly"


async def test_an_unset_env_reference_fails_open_naming_the_variable(run) -> None:
    config = py("print(1)", env={"MAIL_KEY": "${VIKINGBOT_TEST_MAIL_KEY}"})
    result = await run(config, environ=ENV)
    assert result.failed_open
    assert "VIKINGBOT_TEST_MAIL_KEY is not set" in (result.error or "")


async def test_a_missing_program_fails_open(run) -> None:
    result = await run(cmd("no-such-program-vikingbot"), environ=ENV)
    assert result.failed_open
    assert "cannot start 'no-such-program-vikingbot'" in (result.error or "")


async def test_a_missing_command_option_is_reported_where_it_belongs(run) -> None:
    result = await run(CheckerConfig(kind="command"), name="inbox")
    assert result.failed_open
    assert "bot.heartbeat.checkers.inbox.command" in (result.error or "")


async def test_unknown_options_are_refused(run) -> None:
    result = await run(cmd("true", shell=True))
    assert result.failed_open
    assert "unknown option 'shell'" in (result.error or "")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
async def test_timeout_kills_the_command_and_its_children(run, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time;"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']);"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid));"
        "time.sleep(30)"
    )
    started = time.monotonic()
    result = await run(py(script, timeoutS=0.5), environ=ENV)
    elapsed = time.monotonic() - started
    assert result.failed_open and result.has_work
    assert "timed out after 0.5s" in (result.error or "")
    assert elapsed < 5
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child)
