"""`vikingbot cron ...` end to end through the real CLI (SQLite under a temp home)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from vikingbot.cli.app import app
from vikingbot.store.db import StateStore
from vikingbot.store.tables import cron_jobs


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("VIKINGBOT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VIKINGBOT_CONFIG", raising=False)
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(app, list(args))
        return result.exit_code, result.stdout, result.stderr

    return invoke


def test_add_list_disable_enable_remove(cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = cli(
        "cron",
        "add",
        "digest",
        "--cron",
        "0 8 * * 1-5",
        "--tz",
        "Europe/Berlin",
        "--prompt",
        "Summarise my inbox",
        "--target",
        "telegram:42",
        "--json",
    )
    assert code == 0, out
    job = json.loads(out)
    assert job["kind"] == "cron" and job["timezone"] == "Europe/Berlin"
    assert job["target"] == "telegram:42" and job["status"] == "scheduled"

    code, out, _ = cli("cron", "add", "hourly", "--every", "1h", "--prompt", "Check CI")
    assert code == 0 and "first run" in out

    code, out, _ = cli("cron", "list")
    assert code == 0
    assert "digest" in out and "cron 0 8 * * 1-5 (Europe/Berlin)" in out and "every 1h" in out

    assert cli("cron", "disable", "hourly")[0] == 0
    listed = json.loads(cli("cron", "list", "--json")[1])["jobs"]
    assert {j["name"]: j["status"] for j in listed} == {"digest": "scheduled", "hourly": "disabled"}
    assert cli("cron", "enable", "hourly")[0] == 0
    assert cli("cron", "remove", "digest")[0] == 0
    assert [j["name"] for j in json.loads(cli("cron", "list", "--json")[1])["jobs"]] == ["hourly"]


def test_invalid_jobs_are_refused_with_exit_1(cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli(
        "cron", "add", "x", "--cron", "0 9 * * *", "--tz", "Mars/Base", "--prompt", "p"
    )
    assert code == 1 and "unknown IANA timezone 'Mars/Base'" in err
    code, _, err = cli("cron", "add", "x", "--cron", "0 9 * *", "--prompt", "p")
    assert code == 1 and "needs 5 fields" in err
    code, _, err = cli("cron", "remove", "nope")
    assert code == 1 and "no cron job named 'nope'" in err


def test_usage_errors_exit_2(cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli(
        "cron", "add", "x", "--every", "1h", "--at", "2030-01-01T00:00", "--prompt", "p"
    )
    assert code == 2 and "exactly one of" in err
    assert cli("cron", "add", "x", "--every", "1h")[0] == 2  # no --prompt


def test_list_shows_a_job_broken_in_the_database(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path
) -> None:
    assert cli("cron", "add", "broken", "--every", "1h", "--prompt", "p")[0] == 0
    store = StateStore.open(f"sqlite:///{tmp_path / 'home' / 'data' / 'state.db'}")
    with store.engine.begin() as conn:
        conn.execute(sa.update(cron_jobs).values(expr="every now and then"))
    store.close()
    code, out, err = cli("cron", "list")
    assert code == 0 and "invalid" in out and "bad 'every' interval" in err
    [job] = json.loads(cli("cron", "list", "--json")[1])["jobs"]
    assert job["status"] == "invalid" and "every now and then" in job["last_error"]


def test_run_without_a_provider_says_what_to_configure(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("cron", "add", "job", "--every", "1h", "--prompt", "p")[0] == 0
    code, _, err = cli("cron", "run", "job")
    assert code == 1 and "no model provider configured" in err
    code, _, err = cli("cron", "run", "missing")
    assert code == 1 and "no cron job named 'missing'" in err


def test_run_goes_through_the_configured_model(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path
) -> None:
    from vikingbot.testing.fake_openai import FakeOpenAI, reply

    home = tmp_path / "home"
    with FakeOpenAI.start() as fake:
        home.mkdir(parents=True)
        (home / "config.json").write_text(
            json.dumps(
                {
                    "bot": {
                        "owner": "telegram:42",
                        "channels": {"telegram": {"enabled": True}},
                        "agents": {"provider": "openai", "model": "gpt-test"},
                        "providers": {"openai": {"apiBase": fake.base_url, "apiKey": "sk-test"}},
                    }
                }
            )
        )
        fake.script([reply("Two invoices are due this week.")])
        assert cli("cron", "add", "bills", "--every", "1d", "--prompt", "Any bills due?")[0] == 0
        code, out, err = cli("cron", "run", "bills", "--json")
        assert code == 0, err
        run = json.loads(out)
        assert run["outcome"] == "inboxed"  # no gateway here to send to Telegram: kept
        assert run["reply"] == "Two invoices are due this week." and run["manual"] is True
        assert "Any bills due?" in fake.requests[0].last_user_text
    code, out, _ = cli("inbox", "--json")
    assert code == 0 and "Two invoices are due this week." in out


def test_add_without_tz_takes_the_heartbeats_timezone(cli) -> None:  # type: ignore[no-untyped-def]
    """Issue 16: `cron add --tz` defaulted to UTC while the heartbeat used the local zone."""
    from vikingbot.config.zones import default_zone_name
    from vikingbot.heartbeat.timezone import resolve_timezone

    code, out, _ = cli("cron", "add", "a", "--cron", "0 9 * * *", "--prompt", "x", "--json")
    assert code == 0, out
    # not configured: the machine's zone, the same one the heartbeat resolves
    assert json.loads(out)["timezone"] == default_zone_name(None) == resolve_timezone(None).key

    assert cli("config", "set", "bot.heartbeat.timezone", "America/New_York")[0] == 0
    code, out, _ = cli("cron", "add", "b", "--cron", "0 9 * * *", "--prompt", "x", "--json")
    assert json.loads(out)["timezone"] == "America/New_York"
    code, out, _ = cli("cron", "list")
    assert "cron 0 9 * * * (America/New_York)" in out
    # --tz still wins
    code, out, _ = cli("cron", "add", "c", "--cron", "0 9 * * *", "--tz", "UTC", "--prompt", "x")
    assert code == 0
    assert json.loads(cli("cron", "list", "--json")[1])["jobs"][-1]["timezone"] == "UTC"
