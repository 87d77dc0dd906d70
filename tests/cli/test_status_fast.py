"""`vikingbot status` reuses its summary only while the config's inputs are unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

Cli = Callable[..., Result]


def status(cli: Cli, **env: str) -> dict[str, object]:
    result = cli("status", "--json", env=env)
    assert result.exit_code == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_status_sees_every_change_of_the_config_inputs(cli: Cli, home: Path) -> None:
    assert cli("onboard").exit_code == 0
    first = status(cli)
    assert first["heartbeat"] == {"enabled": True, "interval_seconds": 600, "mode": "checklist"}
    assert (home / "run" / "status-view.json").is_file()
    assert status(cli) == first  # from the stored summary

    assert cli("config", "set", "bot.heartbeat.interval_seconds", "1200").exit_code == 0
    assert status(cli)["heartbeat"]["interval_seconds"] == 1200  # type: ignore[index]

    off = status(cli, VIKINGBOT_BOT__HEARTBEAT__ENABLED="false")
    assert off["heartbeat"]["enabled"] is False  # type: ignore[index]
    assert status(cli)["heartbeat"]["enabled"] is True  # type: ignore[index]

    (home / ".env").write_text("VIKINGBOT_BOT__AGENTS__MODEL=from-dotenv\n")
    assert status(cli)["model"] == "from-dotenv"

    (home / "config.json").write_text("{not json")
    bad = cli("status", "--json")
    assert bad.exit_code == 1 and "invalid JSON" in bad.stderr


def test_status_sees_a_key_exported_in_this_shell(
    cli: Cli, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored summary is not reused once a variable the agent's readiness read
    changed: the key exported in one shell, then gone in the next."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert cli("onboard").exit_code == 0
    assert cli("config", "set", "bot.agents.provider", "openai").exit_code == 0
    assert cli("config", "set", "bot.agents.model", "gpt-4o-mini").exit_code == 0
    agent = status(cli)["agent"]
    assert agent["ready"] is False and agent["checked"] == "shell"  # type: ignore[index]
    assert status(cli, OPENAI_API_KEY="sk-exported")["agent"]["ready"] is True  # type: ignore[index]
    assert status(cli)["agent"]["ready"] is False  # type: ignore[index]
    stored = (home / "run" / "status-view.json").read_text()
    assert "sk-exported" not in stored and "OPENAI_API_KEY" in stored


def test_status_counts_are_live(cli: Cli, home: Path, fresh_session: Callable[[str], None]) -> None:
    assert cli("onboard").exit_code == 0
    assert status(cli)["sessions"] == 0
    fresh_session("telegram:default:1")
    fresh_session("heartbeat:hb:shared")  # kept apart: not one of the user's sessions
    assert status(cli)["sessions"] == 1


def test_unchanged_config_is_not_validated_again(cli: Cli, home: Path) -> None:
    """The fast path: neither the config schema nor the home (gateway.compose) is imported."""
    assert cli("onboard").exit_code == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    env["VIKINGBOT_HOME"] = str(home)

    def imported() -> str:
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "vikingbot", "status"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return proc.stderr

    first = imported()  # validated and stored
    assert "vikingbot.config.schema" in first and "vikingbot.gateway.compose" in first
    again = imported()
    assert "vikingbot.config.schema" not in again and "vikingbot.gateway.compose" not in again
    assert "pydantic" not in again  # not even Typer's option parsing ran

    fast = subprocess.run(
        [sys.executable, "-m", "vikingbot", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(fast.stdout) == status(cli)  # the same object as the full command


def test_status_on_a_fresh_home_creates_no_database(tmp_path: Path) -> None:
    """The first `status` on a new home used to create the state database and run every
    migration (about 2 s); it shows the config and makes no database."""
    home = tmp_path / "new-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    env["VIKINGBOT_HOME"] = str(home)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vikingbot", *args],
            env=env,
            capture_output=True,
            text=True,
        )

    first = run("status", "--json")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    assert data["database"] == f"sqlite:///{home / 'data' / 'state.db'}"
    assert (data["sessions"], data["workspaces"]) == (0, 0)
    assert (home / "config.json").is_file()
    assert not list(home.rglob("state.db*"))
    text = run("status")
    assert text.returncode == 0 and "heartbeat:  on, every 600s" in text.stdout
    assert not list(home.rglob("state.db*"))

    # a broken config is still reported by the command, once, with exit 1
    (home / "config.json").write_text("{not json")
    bad = run("status")
    assert bad.returncode == 1 and "invalid JSON" in bad.stderr, bad.stderr
