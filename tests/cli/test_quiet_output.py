"""One-shot commands print their result, not the library's log (issue 42): no DEBUG or
INFO line before `inbox` and `cron list` on a fresh home (the migrations run then);
`mcp probe` says each failure once; `mcp add` names how to check it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import Cli


def test_inbox_and_cron_list_print_no_log_lines(home: Path) -> None:
    """In a real process: loguru's own sink writes to the process's stderr, which an
    in-process runner would not see."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    env["VIKINGBOT_HOME"] = str(home)
    for args in (("inbox",), ("cron", "list")):
        done = subprocess.run(
            [sys.executable, "-m", "vikingbot", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "DEBUG" not in done.stderr and "INFO" not in done.stderr, (args, done.stderr)
    assert (home / "data" / "state.db").exists()  # the migrations did run, silently


def test_mcp_probe_says_each_failure_once(cli: Cli, home: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    added = cli("mcp", "add", "gone", "--", missing)
    assert added.exit_code == 0, added.output
    assert "mcp probe gone" in added.output
    probe = cli("mcp", "probe", "gone")
    assert probe.exit_code == 1
    assert probe.output.count("command not found") == 1, probe.output
