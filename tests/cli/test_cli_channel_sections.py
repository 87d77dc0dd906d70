"""Built-in channel sections (cli, webhook, Slack, Telegram) go through the channel's own
``settings`` model, as a plug-in's do: a config file written before that still loads,
validates and survives ``config set`` / ``config show`` unchanged, secrets masked."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

from vikingbot.config.schema import Config, default_safe_tools

Cli = Callable[..., Result]

SLACK_BOT = "xoxb-111-secret-bot-token"
SLACK_APP = "xapp-222-secret-app-token"
TELEGRAM = "123456:secret-telegram-token"
INBOUND = "secret-inbound-token"

# every key of every built-in section, camelCase in some, snake_case in others
CHANNELS = {
    "cli": {"enabled": False, "allowFrom": ["local"], "ownerChat": "local"},
    "webhook": {
        "enabled": True,
        "allow_from": ["ops"],
        "owner_chat": "ops-room",
        "outbound_urls": ["https://hooks.example.org/in"],
        "inbound_token": INBOUND,
    },
    "slack": {
        "enabled": True,
        "allowFrom": ["U1"],
        "ownerChat": "D42",
        "botToken": SLACK_BOT,
        "appToken": SLACK_APP,
        "apiBase": "http://127.0.0.1:9/api/",
    },
    "telegram": {
        "enabled": True,
        "allow_from": ["42"],
        "owner_chat": "42",
        "token": TELEGRAM,
        "api_base": "http://127.0.0.1:9/bot",
    },
    "sendRetries": 5,
}

SHOWN = {
    "cli": {"enabled": False, "allow_from": ["local"], "owner_chat": "local"},
    "webhook": {
        "enabled": True,
        "allow_from": ["ops"],
        "owner_chat": "ops-room",
        "outbound_urls": ["https://hooks.example.org/in"],
        "inbound_token": "***",
    },
    "slack": {
        "enabled": True,
        "allow_from": ["U1"],
        "owner_chat": "D42",
        "bot_token": "***",
        "app_token": "***",
        "api_base": "http://127.0.0.1:9/api/",
    },
    "telegram": {
        "enabled": True,
        "allow_from": ["42"],
        "owner_chat": "42",
        "token": "***",
        "api_base": "http://127.0.0.1:9/bot",
    },
    "send_retries": 5,
}


# the keys every section has since issue 44 (chat-commands.md), at their defaults
STEERING = {
    "ask_approvals": True,
    "approval_timeout_s": 300.0,
    "pairing": False,
    "typing": True,
    "stream_replies": False,
}
for _name, _section in SHOWN.items():
    if isinstance(_section, dict):
        _section.update(STEERING)


def _write(home: Path, channels: dict[str, object]) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.json"
    path.write_text(json.dumps({"bot": {"channels": channels}}, indent=2) + "\n", "utf-8")
    return path


def _shown_channels(cli: Cli) -> dict[str, object]:
    result = cli("config", "show", "--json")
    assert result.exit_code == 0, result.stderr
    for secret in (SLACK_BOT, SLACK_APP, TELEGRAM, INBOUND):
        assert secret not in result.stdout
    channels = json.loads(result.stdout)["bot"]["channels"]
    assert isinstance(channels, dict)
    return channels


def test_an_old_file_with_every_builtin_section_loads_as_written(cli: Cli, home: Path) -> None:
    _write(home, CHANNELS)
    assert _shown_channels(cli) == SHOWN
    # the running gateway sees the real values, each section as its channel's own model
    config = Config.model_validate({"bot": {"channels": CHANNELS}})
    sections = config.bot.channels.sections()
    assert list(sections) == ["cli", "webhook", "slack", "telegram"]
    assert [type(s).__name__ for s in sections.values()] == [
        "ChannelBase",
        "WebhookSettings",
        "SlackSettings",
        "TelegramSettings",
    ]
    slack = sections["slack"]
    assert slack.model_dump(mode="python")["bot_token"].get_secret_value() == SLACK_BOT


def test_config_set_of_every_shown_value_leaves_the_file_unchanged(cli: Cli, home: Path) -> None:
    path = _write(home, CHANNELS)
    before = path.read_text("utf-8")
    for channel, section in SHOWN.items():
        if not isinstance(section, dict):
            continue
        for key, value in section.items():
            if value == "***" or key in STEERING:  # secrets, and defaults the file lacks
                continue
            result = cli("config", "set", f"bot.channels.{channel}.{key}", json.dumps(value))
            assert result.exit_code == 0, (channel, key, result.stderr)
    assert path.read_text("utf-8") == before  # same values, same spelling, secrets kept
    assert _shown_channels(cli) == SHOWN


def test_a_changed_key_keeps_its_spelling_and_the_secrets(cli: Cli, home: Path) -> None:
    path = _write(home, CHANNELS)
    assert cli("config", "set", "bot.channels.slack.allow_from", '["U1", "U2"]').exit_code == 0
    assert cli("config", "set", "bot.channels.telegram.owner_chat", '"43"').exit_code == 0
    written = json.loads(path.read_text("utf-8"))["bot"]["channels"]
    assert written["slack"]["allowFrom"] == ["U1", "U2"]
    assert written["slack"]["botToken"] == SLACK_BOT
    assert written["telegram"]["owner_chat"] == "43"
    assert written["telegram"]["token"] == TELEGRAM
    shown = _shown_channels(cli)
    assert shown["slack"] == {**SHOWN["slack"], "allow_from": ["U1", "U2"]}  # type: ignore[dict-item]


def test_missing_builtin_sections_take_their_defaults(cli: Cli, home: Path) -> None:
    _write(home, {"telegram": {"enabled": True, "token": TELEGRAM}})
    shown = _shown_channels(cli)
    assert list(shown) == ["send_retries", "cli", "webhook", "slack", "telegram"]
    assert shown["cli"] == {"enabled": True, "allow_from": [], "owner_chat": None, **STEERING}
    assert shown["slack"]["enabled"] is False  # type: ignore[index]
    assert shown["telegram"]["token"] == "***"  # type: ignore[index]


def test_a_bad_key_in_a_builtin_section_is_named(cli: Cli, home: Path) -> None:
    path = _write(home, CHANNELS)
    result = cli("config", "set", "bot.channels.slack.botTokn", "x")
    assert result.exit_code == 1
    assert "slack.botTokn" in result.stderr
    assert json.loads(path.read_text("utf-8"))["bot"]["channels"] == CHANNELS


def test_an_environment_list_reaches_a_builtin_section(cli: Cli, home: Path) -> None:
    env = {
        "VIKINGBOT_BOT__CHANNELS__WEBHOOK__ENABLED": "true",
        "VIKINGBOT_BOT__CHANNELS__WEBHOOK__OUTBOUND_URLS": '["http://127.0.0.1:9/hook"]',
    }
    result = cli("config", "get", "bot.channels.webhook.outbound_urls", env=env)
    assert (result.exit_code, result.stdout) == (0, '["http://127.0.0.1:9/hook"]\n')


def test_the_default_safe_tools_are_the_builtin_read_only_tools_and_message() -> None:
    expected = ["glob", "grep", "list_dir", "read_file", "recall", "search_history", "skill"]
    expected += ["spawn", "web_search", "message"]
    assert default_safe_tools() == expected
    assert Config().bot.heartbeat.safe_tools == expected
