"""`config set` validates first, writes atomically and keeps every other key."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vikingbot.config.edit import get_value, parse_cli_value, set_value
from vikingbot.config.loader import load_config
from vikingbot.errors import ConfigError


@pytest.fixture
def cfg_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "bot": {
                    "heartbeat": {"intervalSeconds": 900},
                    "providers": {"openai": {"api_key": "${OPENAI_KEY}"}},
                    "owner": "telegram:1",
                },
                "storage": {"workspace": "data"},
            },
            indent=2,
        )
    )
    return path


def test_set_keeps_other_keys_and_var_references(cfg_file: Path) -> None:
    set_value(cfg_file, "bot.heartbeat.enabled", False)
    data = json.loads(cfg_file.read_text())
    assert data["bot"]["heartbeat"] == {"intervalSeconds": 900, "enabled": False}
    assert data["bot"]["providers"]["openai"]["api_key"] == "${OPENAI_KEY}"
    assert data["bot"]["owner"] == "telegram:1"
    assert data["storage"] == {"workspace": "data"}


def test_set_reuses_existing_camel_spelling(cfg_file: Path) -> None:
    set_value(cfg_file, "bot.heartbeat.interval_seconds", 1200)
    data = json.loads(cfg_file.read_text())
    assert data["bot"]["heartbeat"] == {"intervalSeconds": 1200}


def test_invalid_set_is_refused_and_file_unchanged(cfg_file: Path) -> None:
    before = cfg_file.read_bytes()
    with pytest.raises(
        ConfigError, match=r"bot\.heartbeat\.interval_seconds: must be at least 10, got 0"
    ):
        set_value(cfg_file, "bot.heartbeat.interval_seconds", 0)
    with pytest.raises(ConfigError, match="unknown key"):
        set_value(cfg_file, "bot.heartbeat.intervall", 5)
    assert cfg_file.read_bytes() == before


def test_set_is_atomic_no_temp_files_left(cfg_file: Path) -> None:
    set_value(cfg_file, "bot.heartbeat.mode", "per-task")
    leftovers = [p.name for p in cfg_file.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    assert oct(os.stat(cfg_file).st_mode & 0o777) == "0o600"


def test_get_value_effective(cfg_file: Path) -> None:
    config, _ = load_config(
        cfg_file, environ={"OPENAI_KEY": "k", "VIKINGBOT_HOME": str(cfg_file.parent)}
    )
    assert get_value(config, "bot.heartbeat.interval_seconds") == 900
    assert get_value(config, "bot.heartbeat.intervalSeconds") == 900
    with pytest.raises(ConfigError, match="unknown key"):
        get_value(config, "bot.nope")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("false", False),
        ("600", 600),
        ("null", None),
        ('["a","b"]', ["a", "b"]),
        ("gpt-4o", "gpt-4o"),
    ],
)
def test_cli_values(text: str, value: object) -> None:
    assert parse_cli_value(text) == value


def test_a_section_shows_its_secret_masked_and_revealed_only_when_asked() -> None:
    from vikingbot.config.edit import to_plain
    from vikingbot.config.schema import Config

    config = Config.model_validate({"bot": {"providers": {"openai": {"apiKey": "sk-live-1"}}}})
    section = get_value(config, "bot.providers.openai")
    assert to_plain(section)["api_key"] == "***"
    assert to_plain(section, reveal=True)["api_key"] == "sk-live-1"
    assert (
        json.loads(json.dumps(to_plain(config, reveal=True)))["bot"]["providers"]["openai"][
            "api_key"
        ]
        == "sk-live-1"
    )
