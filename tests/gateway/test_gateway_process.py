"""The gateway as a real process: first start, /health, signals, bind rules, hot reload."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import forkserver
from tests.support.gateway_proc import GatewayProcess
from tests.support.ports import free_port


def test_fresh_machine_starts_and_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with GatewayProcess(home, fork=False) as gw:
        health = gw.get("/health")
        assert health["status"] == "ok"
        assert health["agent"]["ready"] is False
        assert "bot.agents.provider" in health["agent"]["problem"]
        assert health["heartbeat"] == {"enabled": True, "interval_seconds": 600}
        metrics = gw.get("/metrics")
        assert "vikingbot_heartbeat_cycles_total" in metrics
    assert gw.returncode == 0
    out = gw.output
    assert "✓ Heartbeat: every 600s" in out
    assert "✗ Agent: no model provider configured: set bot.agents.provider" in out
    # first start created the config and the workspace from the template
    assert (home / "config.json").exists()
    heartbeat_md = home / "data" / "workspace" / "shared" / "HEARTBEAT.md"
    assert heartbeat_md.read_text().startswith("# Heartbeat Tasks")
    assert (home / "data" / "state.db").exists()


def test_disabled_heartbeat_is_reported_and_sigint_also_exits_zero(tmp_path: Path) -> None:
    env = {"VIKINGBOT_BOT__HEARTBEAT__ENABLED": "false"}
    gw = GatewayProcess(tmp_path / "home", env=env, fork=False).start()
    assert gw.get("/health")["heartbeat"]["enabled"] is False
    assert gw.stop(signal.SIGINT) == 0
    assert "✗ Heartbeat: disabled" in gw.output


@pytest.fixture(scope="module")
def windowed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, str]]:
    """One gateway for the tests that only look at it (a process start costs seconds):
    a gateway token, and an active-hours window that starts in two hours."""
    from datetime import UTC, datetime, timedelta

    home = tmp_path_factory.mktemp("windowed") / "home"
    home.mkdir()
    now = datetime.now(UTC)
    start, end = ((now + timedelta(hours=h)).strftime("%H:%M") for h in (2, 3))
    hours = {"start": start, "end": end, "timezone": "UTC"}
    (home / "config.json").write_text(json.dumps({"bot": {"heartbeat": {"active_hours": hours}}}))
    env = {"VIKINGBOT_BOT__GATEWAY__TOKEN": "s3cret"}
    with GatewayProcess(home, env=env, fork=False) as gw:
        yield (
            gw,
            (
                f"✓ Heartbeat: every 600s (checklist), active {start}–{end} UTC; "
                f"quiet now, the first cycle at {start}"
            ),
        )


def run_cli(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    import os

    full = {**os.environ, "VIKINGBOT_HOME": str(home), **(env or {})}
    # a new interpreter, as every start in this file (the process itself is under test)
    return forkserver.run(list(args), env=full, timeout=60, fork=False)


def test_non_loopback_bind_without_token_is_refused(tmp_path: Path) -> None:
    res = run_cli(tmp_path / "home", "gateway", "--host", "0.0.0.0", "--port", str(free_port()))
    assert res.returncode == 1
    assert "bot.gateway.token" in res.stderr


def test_port_in_use_is_a_clear_error(tmp_path: Path, windowed: tuple[GatewayProcess, str]) -> None:
    gw, _ = windowed
    res = run_cli(tmp_path / "b", "gateway", "--port", str(gw.port))
    assert res.returncode == 1
    assert f"cannot listen on 127.0.0.1:{gw.port}" in res.stderr


def test_broken_config_fails_with_key_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"bot": {"heartbeat": {"interval_seconds": 0}}}))
    res = run_cli(home, "gateway", "--port", str(free_port()))
    assert res.returncode == 1
    assert "bot.heartbeat.interval_seconds: must be at least 10, got 0" in res.stderr


def test_heartbeat_toggle_applies_without_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with GatewayProcess(home, fork=False) as gw:
        assert gw.get("/health")["heartbeat"]["enabled"] is True
        res = run_cli(home, "config", "set", "bot.heartbeat.enabled", "false")
        assert res.returncode == 0, res.stderr
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and gw.get("/health")["heartbeat"]["enabled"]:
            time.sleep(0.2)
        assert gw.get("/health")["heartbeat"]["enabled"] is False
        res = run_cli(home, "heartbeat", "enable")
        assert res.returncode == 0, res.stderr
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not gw.get("/health")["heartbeat"]["enabled"]:
            time.sleep(0.2)
        assert gw.get("/health")["heartbeat"]["enabled"] is True
    assert "↻ Heartbeat: disabled" in gw.output
    assert "↻ Heartbeat: every 600s" in gw.output


@pytest.mark.parametrize("path", ["/metrics"])
def test_token_protects_everything_but_health(
    windowed: tuple[GatewayProcess, str], path: str
) -> None:
    import urllib.error

    gw, _ = windowed
    assert gw.get("/health")["status"] == "ok"
    with pytest.raises(urllib.error.HTTPError) as exc:
        gw.get(path)
    assert exc.value.code == 401
    exc.value.close()


def test_start_line_says_when_an_active_hours_window_is_in_force(
    windowed: tuple[GatewayProcess, str],
) -> None:
    """Issue 16: a window set (even by accident) made the gateway quiet without a word."""
    gw, line = windowed
    assert gw.get("/health")["status"] == "ok"
    assert line in gw.read_output()


def test_the_console_shows_the_start_lines_and_the_log_file_the_rest(tmp_path: Path) -> None:
    """Issue 30: migration INFO lines came between the gateway's start lines."""
    home = tmp_path / "home"
    with GatewayProcess(home, fork=False) as gw:
        gw.get("/health")
    lines = [x for x in gw.output.splitlines() if x.strip()]
    assert any(x.startswith("✓ Heartbeat") for x in lines)
    assert not [x for x in lines if "| INFO " in x or "| DEBUG " in x], gw.output
    logged = (home / "data" / "logs" / "vikingbot.log").read_text()
    assert "applied migration 0001" in logged and "heartbeat loop started" in logged
