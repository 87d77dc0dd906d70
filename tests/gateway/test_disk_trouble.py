"""A full or read-only home (issue 38): one line naming the path and the cause, at start and in
run-now; the log file degrades to stderr once; /health says "disk full". A real gateway on a
small tmpfs (skipped, saying why, where this machine cannot mount one)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import poll
from tests.support.small_disk import fill, mount_problem, read_only, small_disk

WHY = mount_problem(Path("/tmp") / f"vb-mount-probe-{os.getpid()}")
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VIKINGBOT_HOME": str(home)}
    env.pop("VIKINGBOT_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "vikingbot", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path / "disk", 32) as mounted:
        yield mounted


def test_a_read_only_home_is_one_line_at_start_and_in_run_now(disk: Path) -> None:
    home = disk / "home"
    assert cli(home, "status").returncode == 0  # the first start made the home
    read_only(disk)
    gw = GatewayProcess(home, fork=False)
    start = subprocess.run(
        [sys.executable, "-m", "vikingbot", "gateway", "--port", str(gw.port)],
        env={**gw.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert start.returncode == 1
    assert "Traceback" not in start.stderr
    assert f"Error: cannot write {home}/run/gateway.lock: the file system is read-only" in (
        start.stderr
    )
    run = cli(home, "heartbeat", "run-now")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "read-only" in errors[0].lower(), run.stderr
    assert str(home) in errors[0]  # the path


def test_a_full_home_is_named_in_health_logs_and_run_now(disk: Path, tmp_path: Path) -> None:
    home = disk / "home"
    with GatewayProcess(home, fork=False, log=tmp_path / "gateway.out") as gw:  # off the disk
        fill(disk)

        def full() -> dict[str, list[str]] | None:
            health: dict[str, list[str]] = gw.get("/health")
            return health if any("disk full" in p for p in health["problems"]) else None

        health = poll(full, "health says disk full")
        assert not any("database unreachable" in p for p in health["problems"])
        run = cli(home, "heartbeat", "run-now")
        errors = [line for line in run.stderr.splitlines() if line.startswith("Error:")]
        assert run.returncode == 1 and len(errors) == 1 and "disk is full" in errors[0], run.stderr
        assert "Traceback" not in run.stderr

        def sink_gave_up() -> bool | None:
            run_now(gw)  # each logs a line: the log file's last page fills up
            return "cannot write the log file" in gw.read_output() or None

        poll(sink_gave_up, "the log sink's one line")
    out = gw.output
    assert out.count("cannot write the log file") == 1
    assert "Logging error" not in out


def run_now(gw: GatewayProcess) -> None:
    """One run-now through the control API (on a full disk: an error line in the log)."""
    secret = (gw.home / "run" / "control.secret").read_text().strip()
    req = urllib.request.Request(
        gw.base_url + "/api/v1/heartbeat/run-now",
        data=b"{}",
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        urllib.request.urlopen(req, timeout=10).close()
    except urllib.error.HTTPError as exc:
        assert exc.code == 507, exc.read()
