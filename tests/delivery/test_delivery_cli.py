"""`vikingbot inbox` and `vikingbot channels status` through the CLI runner."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vikingbot.cli.app import app
from vikingbot.config.loader import load_config
from vikingbot.delivery.inbox import Inbox
from vikingbot.store.db import StateStore


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("VIKINGBOT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("VIKINGBOT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def write_config(home: Path, bot: dict[str, object]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps({"bot": bot}), encoding="utf-8")


@pytest.fixture
def inbox(home: Path) -> Inbox:
    _, paths = load_config()
    return Inbox(StateStore.open(paths.database_url))


def test_bare_inbox_lists_unread_items_with_marks(inbox: Inbox) -> None:
    first = inbox.add("default", "Disk is 91% full.\nClean /var/log.", source="heartbeat")
    inbox.add("ops", "Summarise the incident.", source="cron:daily", kind="prompt")
    code, out, err = run("inbox")
    assert code == 0
    # the CLI's one table style (cli/tables.py): a row per item, its text under it
    assert re.search(rf"^●\s+{first}\s+(just now|\d+ s ago)\s+default\s+heartbeat$", out, re.M), out
    assert "    Disk is 91% full.\n    Clean /var/log.\n" in out
    assert re.search(
        r"^●\s+\d+\s+(just now|\d+ s ago)\s+ops \(prompt\)\s+cron:daily$", out, re.M
    ), out
    assert "…" not in out
    assert "2 shown, 2 unread" in err


def test_json_mark_read_and_all(inbox: Inbox) -> None:
    a = inbox.add("default", "one")
    inbox.add("default", "two")
    code, out, _ = run("inbox", "--json", "--mark-read")
    assert code == 0
    items = json.loads(out)
    assert [(i["text"], i["unread"], i["kind"]) for i in items] == [
        ("one", True, "message"),
        ("two", True, "message"),
    ]
    assert items[0]["id"] == a
    code, out, _ = run("inbox", "--json")
    assert json.loads(out) == []
    code, out, _ = run("inbox", "--all", "--json")
    assert [i["unread"] for i in json.loads(out)] == [False, False]
    code, out, _ = run("inbox")
    assert out.strip() == "No unread items."


def test_read_marks_single_items(inbox: Inbox) -> None:
    a = inbox.add("default", "one")
    b = inbox.add("default", "two")
    code, out, _ = run("inbox", "read", str(a), "--json")
    assert (code, json.loads(out)) == (0, {"marked": 1, "via": "local"})
    code, out, _ = run("inbox", "--json")
    assert [i["id"] for i in json.loads(out)] == [b]


def test_channels_status_from_config_only(home: Path) -> None:
    write_config(
        home,
        {
            "owner": "telegram:4242",
            "channels": {
                "slack": {"enabled": True, "botToken": "xoxb-1", "allowFrom": ["C1", "U2"]},
                "telegram": {"enabled": True, "allowFrom": ["*"]},
                "webhook": {"enabled": False, "outboundUrls": ["http://127.0.0.1:9/hook"]},
            },
        },
    )
    code, out, _ = run("channels", "status", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["owner"] == "telegram:4242"
    rows = {r["name"]: r for r in data["channels"]}
    assert rows["slack"]["configured"] is True
    assert rows["slack"]["allow_from"] == ["C1", "U2"]
    assert "no app_token" in rows["slack"]["notes"][0]
    assert rows["telegram"]["missing"] == ["token"]
    assert rows["telegram"]["allow_from"] == "everyone"
    assert rows["telegram"]["owner_chat"] == "4242"
    assert rows["webhook"]["enabled"] is False
    assert rows["cli"] == {
        "name": "cli",
        "enabled": True,
        "configured": True,
        "missing": [],
        "owner_chat": None,
        "allow_from": "owner only",
        "notes": [],
    }
    assert "xoxb-1" not in out

    code, out, err = run("channels", "status")
    assert code == 0
    assert "telegram  yes      missing token" in out
    assert "telegram: enabled but missing token: set bot.channels.telegram.token" in err
