"""`vikingbot --version | --help | onboard | status` through the CLI runner, exact exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

from vikingbot import __version__

Cli = Callable[..., Result]

TEMPLATE = Path(__file__).resolve().parents[2] / "workspace_template"
SUBCOMMANDS = ("onboard", "status", "config", "sessions", "heartbeat", "gateway")


def test_version_prints_the_version(cli: Cli) -> None:
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout == f"vikingbot {__version__}\n"


def test_help_lists_the_sub_commands(cli: Cli) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    for name in SUBCOMMANDS:
        assert name in result.stdout


def test_no_arguments_shows_help_and_is_a_usage_error(cli: Cli) -> None:
    result = cli()
    assert result.exit_code == 2
    assert "heartbeat" in result.stdout + result.stderr


def test_unknown_command_or_option_is_a_usage_error(cli: Cli, home: Path) -> None:
    result = cli("frobnicate")
    assert result.exit_code == 2
    assert "No such command 'frobnicate'" in result.stderr
    result = cli("status", "--frob")
    assert result.exit_code == 2
    assert "--frob" in result.stderr
    result = cli("config", "nope")
    assert result.exit_code == 2
    assert not home.exists()  # a usage error touches nothing


def test_onboard_creates_config_data_workspace_and_database(cli: Cli, home: Path) -> None:
    result = cli("onboard")
    assert result.exit_code == 0, result.stderr
    workspace = home / "data" / "workspace" / "shared"
    written = json.loads((home / "config.json").read_text("utf-8"))
    assert written["bot"]["heartbeat"]["enabled"] is True
    assert written["bot"]["heartbeat"]["interval_seconds"] == 600
    assert (home / "data").is_dir()
    assert (home / "data" / "state.db").is_file()
    assert (workspace / "HEARTBEAT.md").read_bytes() == (TEMPLATE / "HEARTBEAT.md").read_bytes()
    for name in ("SOUL.md", "USER.md", "AGENTS.md", "TOOLS.md", "memory/MEMORY.md"):
        assert (workspace / name).is_file(), name
    for where in (home / "config.json", home / "data", workspace, home / "data" / "state.db"):
        assert str(where) in result.stdout
    # no provider yet: onboard says what to do next
    assert "bot.agents.provider" in result.stdout


def test_onboard_again_keeps_what_the_user_changed(cli: Cli, home: Path) -> None:
    assert cli("onboard").exit_code == 0
    heartbeat = home / "data" / "workspace" / "shared" / "HEARTBEAT.md"
    mine = "# Heartbeat Tasks\n\n## Active Tasks\n\n- [ ] Water the plants\n"
    heartbeat.write_text(mine, "utf-8")
    assert cli("config", "set", "bot.heartbeat.interval_seconds", "1200").exit_code == 0
    config_before = (home / "config.json").read_bytes()

    result = cli("onboard")
    assert result.exit_code == 0, result.stderr
    assert heartbeat.read_text("utf-8") == mine
    assert (home / "config.json").read_bytes() == config_before


def test_onboard_logs_what_it_created_and_debug_only_when_verbose(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    result = cli("onboard", "--json")
    assert result.exit_code == 0, result.stderr
    json.loads(result.stdout)  # stdout stays pure JSON
    assert "from the template" in result.stderr
    assert "applied migration 0001" in result.stderr
    assert "DEBUG" not in result.stderr

    other = tmp_path / "other" / "config.json"
    result = cli("--verbose", "--config", str(other), "onboard")
    assert result.exit_code == 0, result.stderr
    assert "DEBUG" in result.stderr


def test_onboard_json_prints_the_paths(cli: Cli, home: Path) -> None:
    result = cli("onboard", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "config": str(home / "config.json"),
        "data": str(home / "data"),
        "workspace": str(home / "data" / "workspace" / "shared"),
        "database": str(home / "data" / "state.db"),
    }


def test_status_json_without_a_provider(cli: Cli, home: Path) -> None:
    result = cli("status", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["config"] == str(home / "config.json")
    assert data["data_dir"] == str(home / "data")
    assert data["agent"]["loop"] == "builtin"
    assert data["agent"]["ready"] is False
    assert "bot.agents.provider" in data["agent"]["problem"]
    assert data["heartbeat"]["enabled"] is True
    assert data["heartbeat"]["interval_seconds"] == 600
    assert (data["sessions"], data["workspaces"]) == (0, 0)
    assert (home / "config.json").is_file()  # created with defaults on first use


def test_status_counts_sessions_and_workspaces_and_sees_the_provider(
    cli: Cli, fresh_session: Callable[[str], None]
) -> None:
    assert cli("onboard").exit_code == 0
    fresh_session("telegram:default:42")
    fresh_session("slack:default:C1")
    assert cli("config", "set", "bot.agents.provider", "openai").exit_code == 0
    half = json.loads(cli("status", "--json").stdout)["agent"]
    assert half["ready"] is False
    # every missing piece is named: the key (and its variable), the base URL, the model
    for piece in ("OPENAI_API_KEY", "bot.providers.openai.api_base", "bot.agents.model"):
        assert piece in half["problem"]

    assert cli("config", "set", "bot.agents.model", "gpt-x").exit_code == 0
    keyless = json.loads(cli("status", "--json").stdout)["agent"]
    assert keyless["ready"] is False  # a provider without a key cannot work
    assert "bot.agents.model" not in keyless["problem"]
    assert cli("config", "set", "bot.providers.openai.api_key", "sk-test").exit_code == 0
    result = cli("status", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["agent"] == {
        "loop": "builtin",
        "ready": True,
        "problem": None,
        "detail": "openai / gpt-x",
        "checked": "shell",  # no gateway runs: asked in this shell's environment
        "where": "in this shell's environment",
    }
    assert (data["provider"], data["model"]) == ("openai", "gpt-x")
    assert (data["sessions"], data["workspaces"]) == (2, 1)


def test_status_text_says_what_is_on_and_missing(cli: Cli) -> None:
    assert cli("heartbeat", "disable").exit_code == 0
    result = cli("status")
    assert result.exit_code == 0, result.stderr
    assert "heartbeat:  off, every 600s" in result.stdout
    assert "✗" in result.stdout
    assert "bot.agents.provider" in result.stdout


def test_status_with_a_broken_config_names_file_and_line(cli: Cli, home: Path) -> None:
    home.mkdir()
    config = home / "config.json"
    broken = b'{\n  "bot": {\n    "heartbeat": {"enabled": false,}\n  }\n}\n'
    config.write_bytes(broken)
    result = cli("status", "--json")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert str(config) in result.stderr
    assert "line 3" in result.stderr
    assert config.read_bytes() == broken
