"""The tests' fork server starts `python -m vikingbot` as a new interpreter would."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support import forkserver
from tests.support.gateway_proc import GatewayProcess


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    return {**base, "VIKINGBOT_HOME": str(home)}


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["config", "get", "bot.heartbeat.enabeld"], ["no-such-command"]],
    ids=["version", "unknown-key", "unknown-command"],
)
def test_a_forked_command_prints_and_exits_as_a_new_interpreter_does(
    argv: list[str], env: dict[str, str]
) -> None:
    assert forkserver.wanted(env)  # the suite forks (tests/conftest.py)
    forked = forkserver.run(argv, env=env, timeout=60)
    real = forkserver.run(argv, env=env, timeout=60, fork=False)  # a new interpreter
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )


def test_a_start_that_changes_how_python_starts_is_a_new_interpreter(
    env: dict[str, str], tmp_path: Path
) -> None:
    changed = {**env, "PYTHONPATH": str(tmp_path)}
    with (tmp_path / "out").open("w") as out:
        proc = forkserver.spawn(["--version"], env=changed, stdout=out)
        assert isinstance(proc, subprocess.Popen)
        assert proc.wait(60) == 0
    assert "vikingbot" in (tmp_path / "out").read_text()


def test_a_forked_gateway_stops_on_sigterm_and_reports_a_sigkill(tmp_path: Path) -> None:
    calm = GatewayProcess(tmp_path / "calm")
    with calm:
        assert isinstance(calm.proc, forkserver.Forked)
        assert calm.get("/health")["status"] == "ok"
    assert calm.returncode == 0
    assert "stopped" in calm.output

    killed = GatewayProcess(tmp_path / "killed").start()
    assert killed.proc is not None
    os.kill(killed.proc.pid, signal.SIGKILL)
    assert killed.proc.wait(30) == -signal.SIGKILL
    killed.kill()
    assert killed.returncode == -signal.SIGKILL


def test_a_python_variable_set_after_the_server_started_is_a_new_interpreter(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert forkserver.run(["--version"], env=env, timeout=60).returncode == 0  # it runs
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    now = {**os.environ, "VIKINGBOT_HOME": env["VIKINGBOT_HOME"]}
    with (tmp_path / "out").open("w") as out:
        proc = forkserver.spawn(["--version"], env=now, stdout=out)
        assert isinstance(proc, subprocess.Popen)  # the server imported without it
        assert proc.wait(60) == 0
