"""`vikingbot config path | show | get | set` through the CLI runner, exact exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

Cli = Callable[..., Result]
ERROR_0 = "bot.heartbeat.interval_seconds: must be at least 10, got 0"


def test_path_prints_the_default_location_without_creating_it(cli: Cli, home: Path) -> None:
    result = cli("config", "path")
    assert result.exit_code == 0
    assert result.stdout == f"{home / 'config.json'}\n"
    assert not (home / "config.json").exists()


def test_path_follows_config_option_and_variable(cli: Cli, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "work.json"
    assert cli("--config", str(other), "config", "path").stdout == f"{other}\n"
    assert cli("config", "path", env={"VIKINGBOT_CONFIG": str(other)}).stdout == f"{other}\n"


def test_get_prints_the_default_as_json(cli: Cli) -> None:
    result = cli("config", "get", "bot.heartbeat.interval_seconds")
    assert (result.exit_code, result.stdout) == (0, "600\n")
    # camelCase is the same key
    assert cli("config", "get", "bot.heartbeat.intervalSeconds").stdout == "600\n"
    assert cli("config", "get", "bot.gateway.port").stdout == "18790\n"


def test_set_then_get_and_every_other_key_kept(cli: Cli, home: Path) -> None:
    assert cli("config", "get", "bot.heartbeat.enabled").stdout == "true\n"
    before = json.loads((home / "config.json").read_text("utf-8"))

    result = cli("config", "set", "bot.heartbeat.enabled", "false")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert "bot.heartbeat.enabled" in result.stderr

    get = cli("config", "get", "bot.heartbeat.enabled")
    assert (get.exit_code, get.stdout) == (0, "false\n")
    after = json.loads((home / "config.json").read_text("utf-8"))
    before["bot"]["heartbeat"]["enabled"] = False
    assert after == before


def test_set_an_object_value(cli: Cli, tmp_path: Path) -> None:
    feed = str(tmp_path / "feed.txt")
    value = json.dumps({"kind": "file", "path": feed})
    assert cli("config", "set", "bot.heartbeat.checkers.feed", value).exit_code == 0
    result = cli("config", "get", "bot.heartbeat.checkers.feed")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["path"] == feed


def test_set_a_bad_value_exits_1_and_leaves_the_file_alone(cli: Cli, home: Path) -> None:
    assert cli("config", "set", "bot.heartbeat.mode", "per-task").exit_code == 0
    before = (home / "config.json").read_bytes()

    result = cli("config", "set", "bot.heartbeat.interval_seconds", "0")
    assert result.exit_code == 1
    assert ERROR_0 in result.stderr
    assert (home / "config.json").read_bytes() == before

    result = cli("config", "set", "bot.heartbeat.mode", "sometimes")
    assert result.exit_code == 1
    assert "bot.heartbeat.mode" in result.stderr and "sometimes" in result.stderr
    result = cli("config", "set", "bot.heartbeat.enabeld", "false")
    assert result.exit_code == 1
    assert "bot.heartbeat.enabeld: unknown key" in result.stderr
    assert (home / "config.json").read_bytes() == before


def test_set_with_a_missing_argument_is_a_usage_error(cli: Cli, home: Path) -> None:
    result = cli("config", "set", "bot.heartbeat.enabled")
    assert result.exit_code == 2
    assert "Missing argument" in result.stderr
    assert cli("config", "get").exit_code == 2
    assert not home.exists()


def test_get_an_unknown_key_names_it(cli: Cli) -> None:
    result = cli("config", "get", "bot.nope")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "bot.nope" in result.stderr
    result = cli("config", "get", "bot.heartbeat.enabled.deeper")
    assert result.exit_code == 1
    assert "bot.heartbeat.enabled.deeper" in result.stderr


def test_show_masks_secrets(cli: Cli) -> None:
    secret = "tok-7f3a9c-do-not-print"
    result = cli("config", "set", "bot.gateway.token", secret)
    assert result.exit_code == 0, result.stderr
    assert secret not in result.stdout + result.stderr

    shown = cli("config", "show", "--json")
    assert shown.exit_code == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["bot"]["gateway"]["token"] == "***"
    assert data["bot"]["heartbeat"]["interval_seconds"] == 600
    assert secret not in shown.stdout
    text = cli("config", "show")
    assert text.exit_code == 0
    assert "***" in text.stdout and secret not in text.stdout
    got = cli("config", "get", "bot.gateway.token")
    assert (got.exit_code, got.stdout) == (0, '"***"\n')


def test_environment_wins_over_the_file_and_is_never_written(cli: Cli, home: Path) -> None:
    env = {"VIKINGBOT_BOT__HEARTBEAT__INTERVAL_SECONDS": "1800"}
    assert cli("config", "get", "bot.heartbeat.interval_seconds", env=env).stdout == "1800\n"
    assert cli("config", "set", "bot.heartbeat.interval_seconds", "900", env=env).exit_code == 0
    assert cli("config", "get", "bot.heartbeat.interval_seconds", env=env).stdout == "1800\n"
    assert cli("config", "get", "bot.heartbeat.interval_seconds").stdout == "900\n"
    written = json.loads((home / "config.json").read_text("utf-8"))
    assert written["bot"]["heartbeat"]["interval_seconds"] == 900


def test_a_bad_environment_value_names_key_and_source(cli: Cli) -> None:
    env = {"VIKINGBOT_BOT__HEARTBEAT__INTERVAL_SECONDS": "0"}
    result = cli("status", env=env)
    assert result.exit_code == 1
    assert "bot.heartbeat.interval_seconds: must be at least 10, got" in result.stderr
    assert "VIKINGBOT_* environment" in result.stderr


def test_a_broken_file_is_reported_and_never_rewritten(cli: Cli, home: Path) -> None:
    home.mkdir()
    config = home / "config.json"
    broken = b'{\n  "bot": {\n    "heartbeat": {"enabled": false,}\n  }\n}\n'
    config.write_bytes(broken)
    for args in (
        ("config", "show", "--json"),
        ("config", "get", "bot.heartbeat.enabled"),
        ("config", "set", "bot.heartbeat.enabled", "true"),
        ("heartbeat", "enable"),
    ):
        result = cli(*args)
        assert result.exit_code == 1, args
        assert str(config) in result.stderr and "line 3" in result.stderr, args
        assert config.read_bytes() == broken, args


def test_an_unknown_key_in_the_file_is_reported(cli: Cli, home: Path) -> None:
    home.mkdir()
    (home / "config.json").write_text('{"bot": {"heartbeat": {"enabld": false}}}', "utf-8")
    result = cli("status")
    assert result.exit_code == 1
    assert "bot.heartbeat.enabld: unknown key" in result.stderr


def test_set_only_one_end_of_active_hours_is_refused_naming_the_other(cli: Cli, home: Path) -> None:
    assert cli("config", "set", "bot.heartbeat.mode", "per-task").exit_code == 0
    before = (home / "config.json").read_bytes()
    result = cli("config", "set", "bot.heartbeat.active_hours.start", "09:00")
    assert result.exit_code == 1
    assert "bot.heartbeat.active_hours: end is missing" in result.stderr
    assert (home / "config.json").read_bytes() == before

    both = '{"start": "09:00", "end": "17:00"}'
    assert cli("config", "set", "bot.heartbeat.active_hours", both).exit_code == 0
    assert cli("config", "set", "bot.heartbeat.active_hours.end", "18:00").exit_code == 0
    got = cli("config", "get", "bot.heartbeat.active_hours")
    assert json.loads(got.stdout)["end"] == "18:00"


def test_a_mistyped_key_gets_the_key_it_most_looks_like(cli: Cli, home: Path) -> None:
    """Issue 16: `config set …enabeld` said `unknown key` and nothing else."""
    result = cli("config", "set", "bot.heartbeat.enabeld", "false")
    assert result.exit_code == 1
    assert result.stderr.rstrip().endswith(
        "bot.heartbeat.enabeld: unknown key; did you mean bot.heartbeat.enabled?"
    )
    result = cli("config", "get", "bot.heartbeet.enabled")
    assert result.exit_code == 1
    assert "bot.heartbeet: unknown key; did you mean bot.heartbeat?" in result.stderr
    result = cli("config", "set", "bot.heartbeat.intervalSecnds", "60")
    assert "unknown key; did you mean bot.heartbeat.interval_seconds?" in result.stderr
    # nothing close: no guess
    result = cli("config", "set", "bot.heartbeat.zzzzzz", "1")
    assert result.exit_code == 1
    assert "bot.heartbeat.zzzzzz: unknown key" in result.stderr
    assert "did you mean" not in result.stderr


def test_a_mistyped_key_in_the_file_gets_a_suggestion(cli: Cli, home: Path) -> None:
    home.mkdir()
    (home / "config.json").write_text('{"bot": {"heartbeat": {"enabld": false}}}', "utf-8")
    result = cli("status")
    assert "bot.heartbeat.enabld: unknown key; did you mean bot.heartbeat.enabled?" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["hartbeat", "plan"], "No such command 'hartbeat'. Did you mean 'heartbeat'?"),
        (["heartbeat", "plna"], "No such command 'plna'. Did you mean 'plan'?"),
        (["cron", "lst"], "No such command 'lst'. Did you mean 'list'?"),
    ],
)
def test_a_mistyped_command_gets_the_command_it_most_looks_like(
    cli: Cli, argv: list[str], said: str
) -> None:
    result = cli(*argv)
    assert result.exit_code == 2
    assert said in result.stderr


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        (
            "bot.heartbeat.checkers.gh",
            '{"kind": "githb"}',
            "bot.heartbeat: checkers.gh.kind: unknown checker kind 'githb'; valid kinds: "
            "command, file, github, gitlab, http; did you mean github?",
        ),
        (
            "bot.agents.loop",
            "biltin",
            "unknown agent loop 'biltin'; valid loops: acp, builtin; did you mean builtin?",
        ),
        ("bot.agents.provider", "opeani", "anthropic, command, openai; did you mean openai?"),
    ],
)
def test_a_mistyped_name_is_refused_with_the_name_it_most_looks_like(
    cli: Cli, home: Path, key: str, value: str, said: str
) -> None:
    result = cli("config", "set", key, value)
    assert result.exit_code == 1
    assert said in " ".join(result.stderr.split())
