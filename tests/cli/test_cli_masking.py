"""Secrets are masked in every output, wherever they came from (${VAR}, .env, headers, tokens)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from vikingbot.redact import is_secret_name, mask_text

Cli = Callable[..., Result]

PG_PASS = "pg-Secr3t-from-dotenv"
API_TOK = "api-tok-from-env-91b2"
GH_TOKEN = "ghp_literal_in_the_file_77"
CONFIG = {
    "storage": {"database_url": "postgresql://viking:${PG_PASS}@127.0.0.1:5/viking"},
    "bot": {
        "heartbeat": {
            "checkers": {
                "api": {
                    "kind": "http",
                    "url": "https://status.example/?access_token=${API_TOK}",
                    "headers": {"Authorization": "Bearer ${API_TOK}", "X-Api-Key": "${API_TOK}"},
                },
                "gh": {"kind": "github", "token": GH_TOKEN},
                "disk": {"kind": "command", "command": "df -h", "env": {"PGPASSWORD": PG_PASS}},
            }
        }
    },
}


@pytest.fixture
def secrets_home(home: Path) -> Path:
    home.mkdir(parents=True)
    (home / "config.json").write_text(json.dumps(CONFIG))
    (home / ".env").write_text(f"PG_PASS={PG_PASS}\n")
    return home


def _leaks(text: str) -> list[str]:
    return [s for s in (PG_PASS, API_TOK, GH_TOKEN) if s in text]


@pytest.mark.parametrize(
    "args",
    [
        ("config", "show", "--json"),
        ("config", "show"),
        ("config", "get", "storage.database_url"),
        ("config", "get", "storage"),
        ("config", "get", "bot.heartbeat.checkers"),
        ("config", "get", "bot.heartbeat.checkers.gh.token"),
        ("config", "get", "bot.heartbeat.checkers.api.headers"),
        ("status", "--json"),
        ("status",),
    ],
)
def test_no_output_shows_a_secret(cli: Cli, secrets_home: Path, args: tuple[str, ...]) -> None:
    result = cli(*args, env={"API_TOK": API_TOK})
    out = result.stdout + result.stderr
    assert not _leaks(out), out


def test_masked_values_keep_what_is_not_secret(cli: Cli, secrets_home: Path) -> None:
    result = cli("config", "show", "--json", env={"API_TOK": API_TOK})
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["storage"]["database_url"] == "postgresql://viking:***@127.0.0.1:5/viking"
    checkers = data["bot"]["heartbeat"]["checkers"]
    assert checkers["gh"]["token"] == "***"
    assert checkers["api"]["headers"] == {"Authorization": "***", "X-Api-Key": "***"}
    assert checkers["api"]["url"].startswith("https://status.example/?access_token=***")
    assert checkers["disk"]["env"] == {"PGPASSWORD": "***"}
    assert checkers["disk"]["command"] == "df -h"
    assert data["bot"]["agents"]["max_tokens"] == 4096  # a count of tokens is no secret


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("bot_token", True),
        ("apiKey", True),
        ("api_key", True),
        ("password", True),
        ("inboundToken", True),
        ("Authorization", True),
        ("max_tokens", False),
        ("daily_tokens", False),
        ("key", False),
        ("keywords", False),
        ("author", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_mask_text() -> None:
    assert mask_text("redis://:hunter2@h:6379/0") == "redis://:***@h:6379/0"
    assert mask_text("https://h/x?a=1&api_key=abc&b=2") == "https://h/x?a=1&api_key=***&b=2"
    assert mask_text("plain words, no url") == "plain words, no url"


def test_log_lines_mask_url_passwords_and_secret_parameters(tmp_path: Path) -> None:
    from loguru import logger

    from vikingbot.logs import setup_logging

    setup_logging(console=False, logs_dir=tmp_path)
    try:
        logger.info("cannot open {}", f"postgresql://viking:{PG_PASS}@db/viking")
        logger.warning("checker GET https://h/x?access_token={} failed", API_TOK)
        logger.complete()
    finally:
        logger.remove()
        logger.configure(patcher=None)
    text = (tmp_path / "vikingbot.log").read_text()
    assert "postgresql://viking:***@db/viking" in text and "access_token=***" in text
    assert not _leaks(text)
