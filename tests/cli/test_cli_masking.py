"""Secrets are masked in every output, wherever they came from (${VAR}, .env, headers, tokens)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
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


# ---- secrets inside exception text (issue 17): logs, the CLI's errors, chat replies

PROVIDER_KEY = "prov-key-Zq81xxQ"  # no well-known shape: only the remembered value hides it
DB_PASSWORD = "Hunter2-db-pw"


@pytest.fixture
def echoing_provider(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A model endpoint that answers 400 echoing the API key (as some proxies do) and a
    home whose config uses it; yields (api base, home)."""
    from vikingbot.testing.fake_llm import error
    from vikingbot.testing.fake_openai import FakeOpenAI

    with FakeOpenAI.start() as llm:
        llm.responder = lambda _: error(400, f"Incorrect API key provided: {PROVIDER_KEY}.")
        home = tmp_path / "echo-home"
        home.mkdir()
        provider = {"api_key": PROVIDER_KEY, "api_base": llm.base_url, "max_retries": 0}
        config = {"agents": {"provider": "openai", "model": "m"}, "providers": {"openai": provider}}
        (home / "config.json").write_text(json.dumps({"bot": config}))
        yield llm.base_url, home


async def test_a_provider_error_echoing_the_key_is_masked_in_the_log_and_its_traceback(
    echoing_provider: tuple[str, Path], tmp_path: Path
) -> None:
    from loguru import logger

    from vikingbot.config.loader import load_config
    from vikingbot.errors import ProviderError
    from vikingbot.logs import setup_logging
    from vikingbot.providers.base import ChatMessage, ChatRequest
    from vikingbot.providers.factory import create_provider
    from vikingbot.redact import forget_all

    _, home = echoing_provider
    config, _ = load_config(home / "config.json", create=False, environ={})
    provider = create_provider(config, environ={})
    setup_logging(console=False, logs_dir=tmp_path / "logs")
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(ChatRequest("m", [ChatMessage("user", "hi")]))
        assert PROVIDER_KEY in str(caught.value)  # the real SDK error carries the key...
        try:
            raise RuntimeError("the turn failed") from caught.value
        except RuntimeError:
            logger.exception("answering failed")
        logger.complete()
    finally:
        await provider.aclose()
        logger.remove()
        logger.configure(patcher=None)
        forget_all()
    text = (tmp_path / "logs" / "vikingbot.log").read_text()
    assert "Traceback" in text and "Incorrect API key provided: ***" in text
    assert PROVIDER_KEY not in text  # ...the log never does, not even in the traceback


def _vikingbot(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    return subprocess.run(
        [sys.executable, "-m", "vikingbot", *args],
        env={**env, "VIKINGBOT_HOME": str(home)},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_provider_error_echoing_the_key_is_masked_in_chat_output(
    echoing_provider: tuple[str, Path],
) -> None:
    _, home = echoing_provider
    for args in (("chat", "-m", "hi"), ("--verbose", "chat", "-m", "hi")):
        result = _vikingbot(home, *args)
        assert result.returncode == 1
        assert "Incorrect API key provided: ***" in result.stderr
        assert PROVIDER_KEY not in result.stdout + result.stderr


def test_a_database_that_refuses_the_connection_is_one_masked_error_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        home = tmp_path / "pg-home"
        home.mkdir()
        url = f"postgresql://bob:{DB_PASSWORD}@127.0.0.1:{port}/viking"
        (home / "config.json").write_text(json.dumps({"storage": {"database_url": url}}))
        result = _vikingbot(home, "heartbeat", "plan")
        gateway = _vikingbot(home, "gateway", "--port", "0")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"postgresql://bob:***@127.0.0.1:{port}/viking" in result.stderr
    assert DB_PASSWORD not in result.stdout + result.stderr
    assert gateway.returncode == 1 and "cannot open the state database" in gateway.stderr
    logs = "".join(p.read_text() for p in (home / "data" / "logs").glob("*.log"))
    assert DB_PASSWORD not in gateway.stdout + gateway.stderr + logs
