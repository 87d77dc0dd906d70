"""`vikingbot doctor`: the exact lines a user sees, the exit code, --fix and --json."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.support.cli import Cli
from vikingbot.store import migrations
from vikingbot.testing.fake_openai import FakeOpenAI, reply

HEAD = f"{migrations.LATEST_VERSION:04d}"


def _write_config(home: Path, bot: dict[str, object], mode: int = 0o600) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.json"
    path.write_text(json.dumps({"bot": bot}), encoding="utf-8")
    path.chmod(mode)
    return path


READY = {
    "agents": {"provider": "openai", "model": "gpt-x"},
    "providers": {"openai": {"apiKey": "sk-test"}},
    "heartbeat": {"timezone": "Europe/Berlin"},
}


def test_fresh_home_names_what_is_missing_and_exits_1(cli: Cli, home: Path) -> None:
    result = cli("doctor", env={"TZ": "UTC"})
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"! config       no file at {home}/config.json: defaults apply (--fix writes it)"
    )
    assert lines[1].startswith("✗ agent        builtin: no model provider configured: set ")
    assert lines[2] == (
        f"! workspaces   none under {home}/data/workspace (--fix creates the default)"
    )
    assert lines[4] == (
        f"! database     sqlite:///{home}/data/state.db: not created yet "
        "(first start or --fix does)"
    )
    assert lines[5:] == [
        "✓ gateway      not running (CLI commands work locally)",
        "✓ permissions  home and secrets are private to you",
        "",
        "1 failed, 3 to look at",
    ]
    assert not home.exists()  # without --fix nothing is written


def test_ready_home_after_fix_is_all_good(cli: Cli, home: Path) -> None:
    _write_config(home, READY)
    fixed = cli("doctor", "--fix")
    assert fixed.exit_code == 0, fixed.stdout
    ws = home / "data" / "workspace" / "shared"
    assert f"  fixed: created workspace {ws} from the template" in fixed.stdout
    assert (ws / "HEARTBEAT.md").is_file()
    result = cli("doctor")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        f"✓ config            {home}/config.json is valid",
        "✓ agent             builtin: openai / gpt-x (no call made)",
        "✓ workspace shared  HEARTBEAT.md: 0 active entries",
        "✓ timezone          Europe/Berlin (configured); heartbeat active all day",
        f"✓ database          sqlite:///{home}/data/state.db: schema {HEAD} (head)",
        "✓ gateway           not running (CLI commands work locally)",
        "✓ permissions       home and secrets are private to you",
        "",
        "all good",
    ]


def test_missing_key_and_channel_token_are_named(cli: Cli, home: Path) -> None:
    bot = {**READY, "providers": {}, "channels": {"telegram": {"enabled": True}}}
    _write_config(home, bot)
    result = cli("doctor")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[1].startswith("✗ agent             builtin: the openai provider cannot answer")
    assert "OPENAI_API_KEY" in lines[1]
    assert lines[2] == (
        "✗ channel telegram  enabled but missing token: set bot.channels.telegram.token"
    )
    # the key from the environment is enough
    assert cli("doctor", env={"OPENAI_API_KEY": "sk-env"}).stdout.splitlines()[1] == (
        "✓ agent             builtin: openai / gpt-x (no call made)"
    )


def test_a_heartbeat_provider_of_its_own_is_checked_too(cli: Cli, home: Path) -> None:
    """Issue 31: heartbeat turns on another provider: doctor names what that one lacks."""
    cheap = {"kind": "openai", "apiBase": "http://127.0.0.1:9/v1"}
    bot = {
        **READY,
        "providers": {"openai": {"apiKey": "sk-test"}, "cheap": cheap},
        "heartbeat": {"timezone": "UTC", "provider": "cheap", "model": "tiny"},
    }
    _write_config(home, bot)
    ok = [x for x in cli("doctor").stdout.splitlines() if "heartbeat model" in x]
    assert ok == ["✓ heartbeat model  cheap / tiny for heartbeat turns (no call made)"]
    anthropic = {**bot, "heartbeat": {"timezone": "UTC", "provider": "anthropic"}}
    _write_config(home, anthropic)
    result = cli("doctor")
    assert result.exit_code == 1
    (line,) = [x for x in result.stdout.splitlines() if "heartbeat model" in x]
    assert line.startswith("✗ heartbeat model  the anthropic provider cannot answer")
    assert "ANTHROPIC_API_KEY" in line


def test_heartbeat_errors_and_unconfigured_checker_with_their_lines(cli: Cli, home: Path) -> None:
    _write_config(
        home,
        {
            **READY,
            "heartbeat": {
                "timezone": "UTC",
                "checkers": {"web": {"kind": "http", "url": "https://example.org/"}},
            },
        },
    )
    ws = home / "data" / "workspace" / "shared"
    ws.mkdir(parents=True)
    hb = ws / "HEARTBEAT.md"
    hb.write_text(
        "# Active Tasks\n"
        "- [ ] title: disk every: 2h only-if: disk\n"
        "- [ ] title: bad every: banana\n"
        "- [ ] title: site every: 1h only-if: web\n",
        encoding="utf-8",
    )
    result = cli("doctor")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    at = lines.index(
        f"✗ workspace shared  {hb}:2: only-if: disk is not configured "
        "(add bot.heartbeat.checkers.disk)"
    )
    assert lines[at + 1].startswith(f"  {hb}:3: every: needs a duration")
    assert "'banana'" in lines[at + 1]
    assert "web" not in result.stdout  # configured: no complaint


def test_world_readable_secrets_are_fixed_by_fix(cli: Cli, home: Path) -> None:
    config = _write_config(home, READY, mode=0o644)
    env_file = home / ".env"
    env_file.write_text("OPENAI_API_KEY=sk-x\n", encoding="utf-8")
    env_file.chmod(0o640)
    before = cli("doctor")
    assert before.exit_code == 1
    assert f"✗ permissions  {config} is 0644: others may read it (--fix makes it 0600)" in (
        before.stdout.splitlines()
    )
    assert f"{env_file} is 0640: others may read it" in before.stdout
    fixed = cli("doctor", "--fix")
    assert fixed.exit_code == 0, fixed.stdout
    assert f"  fixed: {config}: 0644 -> 0600" in fixed.stdout.splitlines()
    assert f"  fixed: {env_file}: 0640 -> 0600" in fixed.stdout.splitlines()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert cli("doctor").exit_code == 0


def test_json_shape(cli: Cli, home: Path) -> None:
    _write_config(home, READY)
    data = json.loads(cli("doctor", "--json").stdout)
    assert data["ok"] is True
    assert [c["name"] for c in data["checks"]] == [
        "config",
        "agent",
        "workspaces",
        "timezone",
        "database",
        "gateway",
        "permissions",
    ]
    assert set(data["checks"][0]) == {"name", "status", "message", "fixed"}
    assert [c["status"] for c in data["checks"]] == ["ok", "ok", "warn", "ok", "warn", "ok", "ok"]


def test_live_makes_one_call_through_the_loop(cli: Cli, home: Path) -> None:
    with FakeOpenAI.start() as fake:
        fake.script([reply("OK")])
        bot = {**READY, "providers": {"openai": {"apiKey": "sk-t", "apiBase": fake.base_url}}}
        _write_config(home, bot)
        result = cli("doctor", "--live")
        assert len(fake.requests) == 1
    assert result.stdout.splitlines()[1] == (
        "✓ agent             builtin: openai / gpt-x: live call answered 'OK'"
    )
    with FakeOpenAI.start() as down:
        down.script([reply("x")])
        # no retries: the SDK's three, with their backoff, only delayed the same failure
        openai = {"apiKey": "sk-t", "apiBase": down.base_url, "maxRetries": 0}
        bot = {**READY, "providers": {"openai": openai}}
        base = down.base_url
    _write_config(home, bot)  # the server is gone: the call fails and says so
    result = cli("doctor", "--live")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[1].startswith(
        "✗ agent             builtin: openai / gpt-x: live call failed: "
    )
    assert base


def test_a_checker_without_its_credential_is_a_warning_naming_the_variable(
    cli: Cli, home: Path
) -> None:
    """Issue 30: the README's github checker ran without GITHUB_TOKEN, failing open,
    while doctor said all good."""
    bot = {**READY, "heartbeat": {"timezone": "UTC", "checkers": {"github": {"kind": "github"}}}}
    _write_config(home, bot)
    result = cli("doctor", env={"GITHUB_TOKEN": ""})
    assert result.exit_code == 0  # a warning: the rest works
    (row,) = [x for x in result.stdout.splitlines() if "checker github" in x]
    assert row.startswith("! checker github")
    assert "GITHUB_TOKEN" in row and "fail-open" in " ".join(result.stdout.split())
    fine = cli("doctor", env={"GITHUB_TOKEN": "ghp_test"})
    assert "checker github" not in fine.stdout
