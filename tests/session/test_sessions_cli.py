"""`vikingbot sessions ...` through the CLI runner, with exact exit codes."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vikingbot.cli.app import app
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message, SessionKey


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("VIKINGBOT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("VIKINGBOT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # no stray ./.env
    return tmp_path / "home"


@pytest.fixture
def store(home: Path) -> SessionStore:
    return SessionStore(home / "data" / "sessions")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_list_on_an_empty_machine(home: Path) -> None:
    code, out, _ = run("sessions", "list", "--json")
    assert code == 0
    assert json.loads(out) == {"sessions": [], "errors": []}
    code, out, _ = run("sessions", "list")
    assert (code, out.strip()) == (0, "No sessions yet.")


def test_list_shows_keys_times_heartbeat_and_counts(store: SessionStore) -> None:
    store.get_or_create("cli:default:direct", skip_heartbeat=True)
    when = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    store.append(
        "telegram:default:42", Message("user", "hi", when), Message("assistant", "yo", when)
    )
    code, out, _ = run("sessions", "list", "--json")
    assert code == 0
    rows = {r["key"]: r for r in json.loads(out)["sessions"]}
    assert rows["telegram:default:42"]["last_user_at"] == "2026-01-05T12:00:00+00:00"
    assert rows["telegram:default:42"]["messages"] == 2
    assert rows["telegram:default:42"]["skip_heartbeat"] is False
    assert rows["cli:default:direct"]["skip_heartbeat"] is True
    assert rows["cli:default:direct"]["last_user_at"] is None
    code, out, _ = run("sessions", "list")
    assert code == 0 and "telegram:default:42" in out and "cli:default:direct" in out


def test_list_reports_a_broken_file_on_stderr_and_lists_the_rest(store: SessionStore) -> None:
    store.get_or_create("telegram:default:42")
    (store.sessions_dir / "broken.jsonl").write_text("garbage\n", "utf-8")
    code, out, err = run("sessions", "list", "--json")
    assert code == 0
    data = json.loads(out)
    assert [r["key"] for r in data["sessions"]] == ["telegram:default:42"]
    assert "broken.jsonl:1" in data["errors"][0]
    assert "broken.jsonl" in err


def test_heartbeat_off_and_on(store: SessionStore) -> None:
    store.get_or_create("telegram:default:42")
    code, out, _ = run("sessions", "heartbeat", "off", "telegram:default:42")
    assert code == 0 and "off" in out
    meta = store.get_meta(SessionKey("telegram", "default", "42"))
    assert meta is not None and meta.skip_heartbeat is True
    code, _, _ = run("sessions", "heartbeat", "on", "telegram:42")  # channel defaults
    assert code == 0
    meta = store.get_meta(SessionKey("telegram", "default", "42"))
    assert meta is not None and meta.skip_heartbeat is False


def test_heartbeat_on_an_unknown_session_exits_1(store: SessionStore) -> None:
    code, _, err = run("sessions", "heartbeat", "off", "telegram:default:404")
    assert code == 1
    assert "unknown session telegram:default:404" in err
    assert not store.sessions_dir.exists() or not any(store.sessions_dir.glob("*.jsonl"))


@pytest.mark.parametrize(
    "args",
    [
        ("sessions", "heartbeat", "maybe", "telegram:default:42"),
        ("sessions", "heartbeat", "off", "no-colon"),
        ("sessions", "heartbeat", "off"),
        ("sessions", "list", "--jsn"),
    ],
)
def test_usage_errors_exit_2(home: Path, args: tuple[str, ...]) -> None:
    code, _, _ = run(*args)
    assert code == 2


def _openviking(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "telegram__default__7.jsonl").write_text(
        '{"_type": "metadata", "session_key": "telegram__default__7", "metadata": {}}\n'
        '{"role": "user", "content": "old chat", "timestamp": "2026-01-01T10:00:00+00:00"}\n',
        "utf-8",
    )
    return folder


def test_import_openviking_json_then_again(tmp_path: Path, store: SessionStore) -> None:
    source = _openviking(tmp_path / "ov")
    code, out, _ = run("sessions", "import-openviking", str(source), "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["imported"], data["exists"], data["failed"]) == (1, 0, 0)
    assert data["sessions"][0]["key"] == "telegram:default:7"
    assert [m.content for m in store.read_messages("telegram:default:7")] == ["old chat"]

    code, out, _ = run("sessions", "import-openviking", str(source))
    assert code == 0
    assert "0 imported, 1 already present, 0 failed." in out


def test_import_openviking_with_a_bad_file_exits_1_after_importing_the_rest(
    tmp_path: Path, store: SessionStore
) -> None:
    source = _openviking(tmp_path / "ov")
    (source / "bad.jsonl").write_text("not json\n", "utf-8")
    code, out, err = run("sessions", "import-openviking", str(source))
    assert code == 1
    assert "1 imported, 0 already present, 1 failed." in out
    assert "bad.jsonl:1" in err
    assert store.get_meta("telegram:default:7") is not None


def test_import_openviking_from_nowhere_exits_1(tmp_path: Path, home: Path) -> None:
    code, _, err = run("sessions", "import-openviking", str(tmp_path / "missing"))
    assert code == 1 and "no such file or folder" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run("sessions", "import-openviking", str(tmp_path / "empty"))
    assert code == 1 and "no session files" in err
