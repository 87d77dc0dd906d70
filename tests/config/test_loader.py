"""Config loading: defaults, file, .env, environment, ${VAR}, camelCase, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vikingbot.config.loader import load_config
from vikingbot.errors import ConfigError


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no stray ./.env
    return tmp_path / "home"


def env(home: Path, **extra: str) -> dict[str, str]:
    return {"VIKINGBOT_HOME": str(home), **extra}


def test_first_load_creates_file_with_defaults(home: Path) -> None:
    config, paths = load_config(environ=env(home))
    assert paths.config_file == home / "config.json"
    assert paths.config_file.exists()
    on_disk = json.loads(paths.config_file.read_text())
    assert on_disk["bot"]["heartbeat"]["enabled"] is True
    assert on_disk["bot"]["heartbeat"]["interval_seconds"] == 600
    assert config.bot.gateway.port == 18790
    assert paths.data_dir == home / "data"
    assert paths.database_url == f"sqlite:///{home / 'data' / 'state.db'}"


def test_no_create_leaves_no_file(home: Path) -> None:
    config, paths = load_config(environ=env(home), create=False)
    assert not paths.config_file.exists()
    assert config.bot.heartbeat.enabled is True


def test_precedence_env_over_dotenv_over_file_over_default(home: Path) -> None:
    write(
        home / "config.json",
        {"bot": {"heartbeat": {"interval_seconds": 900, "max_concurrency": 2}}},
    )
    (home / ".env").write_text(
        "VIKINGBOT_BOT__HEARTBEAT__INTERVAL_SECONDS=700\nVIKINGBOT_BOT__HEARTBEAT__MODE=per-task\n"
    )
    config, _ = load_config(environ=env(home, VIKINGBOT_BOT__HEARTBEAT__MODE="checklist"))
    assert config.bot.heartbeat.interval_seconds == 700  # .env beats the file
    assert config.bot.heartbeat.mode == "checklist"  # the environment beats .env
    assert config.bot.heartbeat.max_concurrency == 2  # the file beats the default
    assert config.bot.heartbeat.task_timeout_s == 1800  # default


def test_env_turns_heartbeat_off(home: Path) -> None:
    config, _ = load_config(environ=env(home, VIKINGBOT_BOT__HEARTBEAT__ENABLED="false"))
    assert config.bot.heartbeat.enabled is False


def test_camel_and_snake_case_both_accepted(home: Path) -> None:
    path = write(
        home / "config.json",
        {
            "bot": {
                "heartbeat": {"intervalSeconds": 120, "task_timeout_s": 30},
                "agents": {"maxToolIterations": 7},
            }
        },
    )
    config, _ = load_config(
        path, environ=env(home, VIKINGBOT_BOT__HEARTBEAT__INTERVAL_SECONDS="60")
    )
    assert config.bot.heartbeat.interval_seconds == 60
    assert config.bot.heartbeat.task_timeout_s == 30
    assert config.bot.agents.max_tool_iterations == 7


def test_var_expansion_keeps_secrets_out_of_the_file(home: Path) -> None:
    path = write(home / "config.json", {"bot": {"providers": {"openai": {"api_key": "${MY_KEY}"}}}})
    config, _ = load_config(path, environ=env(home, MY_KEY="sk-secret"))
    key = config.bot.providers["openai"].api_key
    assert key is not None and key.get_secret_value() == "sk-secret"


def test_var_expansion_from_dotenv(home: Path) -> None:
    path = write(home / "config.json", {"bot": {"owner": "telegram:${OWNER_ID}"}})
    (home / ".env").write_text("OWNER_ID=4242\n")
    config, _ = load_config(path, environ=env(home))
    assert config.bot.owner == "telegram:4242"


def test_missing_var_names_key_and_variable(home: Path) -> None:
    path = write(home / "config.json", {"bot": {"providers": {"openai": {"api_key": "${NOPE}"}}}})
    with pytest.raises(ConfigError) as exc:
        load_config(path, environ=env(home))
    assert "bot.providers.openai.api_key" in str(exc.value)
    assert "NOPE" in str(exc.value)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"bot": {"heartbeat": {"interval_seconds": 0}}},
            "bot.heartbeat.interval_seconds: must be at least 10, got 0",
        ),
        ({"bot": {"heartbeat": {"mode": "sometimes"}}}, "bot.heartbeat.mode: must be one of"),
        ({"bot": {"heartbeat": {"enabeld": False}}}, "bot.heartbeat.enabeld: unknown key"),
        (
            {"bot": {"gateway": {"port": 70000}}},
            "bot.gateway.port: must be at most 65535, got 70000",
        ),
        (
            {"bot": {"heartbeat": {"timezone": "Mars/Base"}}},
            "bot.heartbeat.timezone: unknown IANA timezone",
        ),
        (
            {"bot": {"heartbeat": {"active_hours": {"start": "25:00"}}}},
            "bot.heartbeat.active_hours.start: expected a time HH:MM",
        ),
        (
            {"bot": {"heartbeat": {"active_hours": {"start": "09:00"}}}},
            "bot.heartbeat.active_hours: end is missing: active_hours needs both start and end",
        ),
        (
            {"bot": {"heartbeat": {"activeHours": {"end": "17:00", "timezone": "UTC"}}}},
            "bot.heartbeat.active_hours: start is missing: active_hours needs both start and end",
        ),
        (
            {"bot": {"heartbeat": {"stale_after": "soon"}}},
            "bot.heartbeat.stale_after: expected a duration",
        ),
        (
            {"storage": {"database_url": "mysql://x"}},
            "storage.database_url: expected a sqlite:// or postgresql:// URL",
        ),
        ({"bots": {}}, "bots: unknown key"),
    ],
)
def test_bad_values_name_key_value_and_expectation(home: Path, data: object, expected: str) -> None:
    path = write(home / "config.json", data)
    with pytest.raises(ConfigError) as exc:
        load_config(path, environ=env(home))
    assert expected in str(exc.value)


def test_bad_env_value_is_reported_with_key(home: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(environ=env(home, VIKINGBOT_BOT__HEARTBEAT__INTERVAL_SECONDS="5"))
    assert "bot.heartbeat.interval_seconds: must be at least 10" in str(exc.value)
    assert "environment" in str(exc.value)


def test_unknown_env_key_is_reported(home: Path) -> None:
    with pytest.raises(ConfigError, match=r"bot\.heartbeat\.foo: unknown key"):
        load_config(environ=env(home, VIKINGBOT_BOT__HEARTBEAT__FOO="1"))


def test_invalid_json_names_file_line_and_column(home: Path) -> None:
    path = home / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text('{\n  "bot": {\n    "heartbeat": {"enabled": tru}\n  }\n}\n')
    with pytest.raises(ConfigError) as exc:
        load_config(path, environ=env(home))
    assert str(path) in str(exc.value) and "line 3" in str(exc.value)
    assert path.read_text().count("tru}") == 1  # the user's file is left as it was


def test_secret_values_never_appear_in_errors(home: Path) -> None:
    path = write(home / "config.json", {"bot": {"gateway": {"token": 12345678, "port": 0}}})
    with pytest.raises(ConfigError) as exc:
        load_config(path, environ=env(home))
    assert "12345678" not in str(exc.value)


def test_explicit_path_and_env_var_path(home: Path, tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", {"bot": {"heartbeat": {"interval_seconds": 11}}})
    b = write(tmp_path / "b.json", {"bot": {"heartbeat": {"interval_seconds": 22}}})
    assert (
        load_config(a, environ=env(home, VIKINGBOT_CONFIG=str(b)))[0].bot.heartbeat.interval_seconds
        == 11
    )
    assert (
        load_config(environ=env(home, VIKINGBOT_CONFIG=str(b)))[0].bot.heartbeat.interval_seconds
        == 22
    )


def test_relative_data_dir_is_relative_to_the_config_file(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "conf" / "c.json", {"storage": {"workspace": "mydata"}})
    _, paths = load_config(path, environ=env(home))
    assert paths.data_dir == tmp_path / "conf" / "mydata"
    assert paths.workspace_root == tmp_path / "conf" / "mydata" / "workspace"


def test_checker_secrets_are_not_expanded_at_load(home: Path) -> None:
    """A checker's missing secret must fail that checker open, not the whole config."""
    data = {"bot": {"heartbeat": {"checkers": {"gh": {"kind": "github", "token": "${GH_TOKEN}"}}}}}
    path = write(home / "config.json", data)
    config, _ = load_config(path, environ=env(home))
    assert config.bot.heartbeat.checkers["gh"].model_extra == {"token": "${GH_TOKEN}"}
