"""An environment variable works in either spelling of a key the config file writes in
camelCase (issue 41): `..._ALLOW_FROM` beside the file's `allowFrom`, `..._INTERVALSECONDS`
beside `intervalSeconds`; the environment wins and nothing stops."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from vikingbot.config.loader import _env_snake, load_config

FILE = {
    "bot": {
        "heartbeat": {"intervalSeconds": 600, "activeHours": {"start": "08:00", "end": "20:00"}},
        "providers": {"openai": {"apiKey": "sk-file"}},
        "channels": {"telegram": {"allowFrom": ["1"], "ownerChat": "1"}},
    }
}


def load(tmp_path: Path, **env: str) -> object:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(FILE))
    return load_config(path, environ={"VIKINGBOT_HOME": str(tmp_path), **env})[0]


def test_snake_and_capital_camel_spellings_meet_the_files_camel_case(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        VIKINGBOT_BOT__CHANNELS__TELEGRAM__ALLOW_FROM='["2"]',
        VIKINGBOT_BOT__CHANNELS__TELEGRAM__OWNER_CHAT="2",
        VIKINGBOT_BOT__HEARTBEAT__INTERVALSECONDS="60",
        VIKINGBOT_BOT__HEARTBEAT__ACTIVE_HOURS__START="09:00",
        VIKINGBOT_BOT__PROVIDERS__OPENAI__APIKEY="sk-env",
    )
    bot = config.bot  # type: ignore[attr-defined]
    telegram = bot.channels.sections()["telegram"]
    assert (telegram.allow_from, telegram.owner_chat) == (["2"], "2")
    assert bot.heartbeat.interval_seconds == 60
    assert (bot.heartbeat.active_hours.start, bot.heartbeat.active_hours.end) == ("09:00", "20:00")
    assert bot.providers["openai"].api_key.get_secret_value() == "sk-env"


def test_names_are_rewritten_along_the_schema_only() -> None:
    assert _env_snake("vikingbot_bot__tools__mcpservers__my_srv__command") == (
        "vikingbot_bot__tools__mcp_servers__my_srv__command"
    )
    assert _env_snake("vikingbot_storage__databaseurl") == "vikingbot_storage__database_url"
    assert _env_snake("vikingbot_nothing__at__all") == "vikingbot_nothing__at__all"


@given(st.text(max_size=200))
def test_any_variable_name_is_total(name: str) -> None:
    assert isinstance(_env_snake(name.lower()), str)
