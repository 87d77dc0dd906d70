"""`vikingbot service`: install, uninstall, status and logs against a recording service
manager on the PATH (and `systemd-analyze verify` on the unit where it exists)."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from vikingbot.cli.app import app
from vikingbot.service.manager import parse_status

FAKE = Path(__file__).with_name("fake_manager.py")


class Machine:
    """A HOME with a non-ASCII, spaced path and a PATH that finds the fake manager."""

    def __init__(self, root: Path) -> None:
        self.home = root / "Jürgen Ö home"
        self.home.mkdir()
        self.bin = root / "bin"
        self.bin.mkdir()
        self.log = root / "calls.log"
        self.env = {
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "VIKINGBOT_HOME": str(self.home / ".vikingbot"),
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "FAKE_MANAGER_LOG": str(self.log),
        }
        for name in ("systemctl", "launchctl"):
            shim = self.bin / name
            shim.write_text(
                f'#!/bin/sh\nFAKE_MANAGER_NAME={name} exec {sys.executable} {FAKE} "$@"\n'
            )
            shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
        # `launchctl` answers as it would on macOS; systemd is the default on Linux

    @property
    def unit(self) -> Path:
        return self.home / ".config" / "systemd" / "user" / "vikingbot.service"

    def run(self, *args: str, **extra: str) -> Result:
        return CliRunner().invoke(app, ["service", *args], env={**self.env, **extra})

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    for name in list(os.environ):
        if name.startswith("VIKINGBOT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return Machine(tmp_path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd user units: Linux")
def test_install_writes_a_valid_unit_and_starts_it(machine: Machine) -> None:
    result = machine.run("install")
    assert result.exit_code == 0, result.output
    text = machine.unit.read_text()
    assert f'"{sys.executable}" "-m" "vikingbot" "--config"' in text
    assert f'"VIKINGBOT_HOME={machine.home}/.vikingbot"' in text
    assert "Restart=on-failure" in text and "NoNewPrivileges=yes" in text
    assert [c[1:] for c in machine.calls() if c[2] != "show-environment"] == [
        ["--user", "daemon-reload"],
        ["--user", "enable", "vikingbot.service"],
        ["--user", "restart", "vikingbot.service"],
    ]
    assert "loginctl enable-linger" in result.output
    verify = shutil.which("systemd-analyze")
    if verify:
        done = subprocess.run(
            [verify, "verify", str(machine.unit)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr


def test_install_again_changes_nothing_and_does_not_restart(machine: Machine) -> None:
    assert machine.run("install", "--manager", "systemd").exit_code == 0
    before = machine.unit.stat().st_mtime_ns
    machine.log.unlink()
    again = machine.run("install", "--manager", "systemd")
    assert again.exit_code == 0, again.output
    assert "is current" in again.output
    assert machine.unit.stat().st_mtime_ns == before
    assert ["systemctl", "--user", "restart", "vikingbot.service"] not in machine.calls()


def test_install_rewrites_a_stale_unit(machine: Machine) -> None:
    assert machine.run("install", "--manager", "systemd").exit_code == 0
    fresh = machine.unit.read_text()
    machine.unit.write_text(fresh.replace("/.vikingbot", "/old-home"))
    result = machine.run("install", "--manager", "systemd")
    assert result.exit_code == 0, result.output
    assert "rewrote the stale" in result.output
    assert machine.unit.read_text() == fresh
    assert ["systemctl", "--user", "restart", "vikingbot.service"] in machine.calls()


def test_unreachable_manager_writes_nothing_and_names_the_foreground_command(
    machine: Machine,
) -> None:
    result = machine.run("install", "--manager", "systemd", FAKE_MANAGER_DOWN="1")
    assert result.exit_code == 1
    assert "Failed to connect to bus" in result.output
    # the command as the user runs vikingbot (`uv run vikingbot gateway` in a clone),
    # not the venv's python with the config's full path
    from vikingbot.cli.typed import typed

    assert result.output.rstrip().endswith("\n  " + typed("gateway"))
    assert not machine.unit.exists()


def test_dry_run_prints_the_unit_and_touches_nothing(machine: Machine) -> None:
    result = machine.run("install", "--dry-run", "--manager", "systemd")
    assert result.exit_code == 0, result.output
    assert "[Service]" in result.output and "$ systemctl --user enable vikingbot.service" in (
        result.output
    )
    assert not machine.unit.exists()
    assert machine.calls() == []


def test_uninstall(machine: Machine) -> None:
    nothing = machine.run("uninstall", "--manager", "systemd")
    assert nothing.exit_code == 0
    assert "nothing to uninstall" in nothing.output
    assert machine.run("install", "--manager", "systemd").exit_code == 0
    gone = machine.run("uninstall", "--manager", "systemd")
    assert gone.exit_code == 0, gone.output
    assert not machine.unit.exists()
    assert ["systemctl", "--user", "disable", "--now", "vikingbot.service"] in machine.calls()


def test_status_shows_the_manager_beside_the_gateway(machine: Machine) -> None:
    before = machine.run("status", "--manager", "systemd")
    assert "service: not installed" in before.output
    assert machine.run("install", "--manager", "systemd").exit_code == 0
    after = machine.run("status", "--manager", "systemd", "--json")
    assert after.exit_code == 0, after.output
    view = json.loads(after.output)
    assert view["installed"] is True
    assert view["service"]["ActiveState"] == "active"
    assert view["gateway"] is None  # no gateway runs on this home


def test_launchd_agent(machine: Machine) -> None:
    result = machine.run("install", "--manager", "launchd")
    assert result.exit_code == 0, result.output
    plist = machine.home / "Library" / "LaunchAgents" / "dev.vikingbot.gateway.plist"
    data = plistlib.loads(plist.read_bytes())
    assert data["ProgramArguments"][:3] == [sys.executable, "-m", "vikingbot"]
    assert data["RunAtLoad"] is True and data["KeepAlive"] == {"SuccessfulExit": False}
    assert data["EnvironmentVariables"]["VIKINGBOT_HOME"] == f"{machine.home}/.vikingbot"
    uid = str(os.getuid())
    assert ["launchctl", "bootstrap", f"gui/{uid}", str(plist)] in machine.calls()


def test_logs_prints_the_last_lines(machine: Machine) -> None:
    logs = machine.home / ".vikingbot" / "data" / "logs"
    missing = machine.run("logs", "--no-follow")
    assert missing.exit_code == 1 and "no gateway log yet" in missing.output
    logs.mkdir(parents=True)
    (logs / "vikingbot.log").write_text("".join(f"line {i}\n" for i in range(500)))
    result = machine.run("logs", "--no-follow", "-n", "3")
    assert result.exit_code == 0, result.output
    assert result.output == "line 497\nline 498\nline 499\n"


@given(st.text(), st.sampled_from(["systemd", "launchd"]))
def test_status_parser_is_total(text: str, kind: str) -> None:
    found = parse_status(kind, text)  # type: ignore[arg-type]
    assert all(isinstance(v, str) for v in found.values())
