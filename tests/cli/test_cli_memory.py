"""`vikingbot memory log|show|undo`, `sessions compact` and `chat -m --json`'s request sizes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.summariser import kind, markers, summariser
from vikingbot.agent import compact
from vikingbot.memory import versions
from vikingbot.session.store import SessionStore
from vikingbot.testing.fake_openai import FakeOpenAI

KEY = "cli:default:local"


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as fake:
        fake.responder = summariser()
        yield fake


@pytest.fixture
def configured(home: Path, llm: FakeOpenAI) -> Path:
    home.mkdir()
    bot = {
        "agents": {"provider": "openai", "model": "gpt-test"},
        "providers": {"openai": {"apiBase": llm.base_url, "apiKey": "sk-test", "maxRetries": 0}},
    }
    (home / "config.json").write_text(json.dumps({"bot": bot}))
    return home


def test_chat_json_compact_and_memory_undo(cli: Cli, configured: Path, llm: FakeOpenAI) -> None:
    for text in ("MARK-1 my bike is blue", "MARK-2 my cat is Tom", "and now?"):
        done = cli("chat", "-s", KEY, "-m", text, "--json")
        assert done.exit_code == 0, done.output
    turn = json.loads(done.stdout)
    assert set(turn["request_chars"]) == {"system", "memory", "summary", "recent", "tools"}
    assert turn["request_chars"]["recent"] > 0 and turn["request_chars"]["tools"] > 0

    status = cli("status", "--json")
    [last] = json.loads(status.stdout)["last_requests"]
    assert last["session"] == KEY and last["recent"] == turn["request_chars"]["recent"]

    folded = cli("sessions", "compact", KEY)
    assert folded.exit_code == 0 and "4 message(s) folded" in folded.stdout
    assert kind(llm.requests[-1]) == "summary"
    entries = [
        m
        for m in SessionStore(configured / "data" / "sessions").read_messages(KEY)
        if compact.is_summary(m)
    ]
    assert [markers(e.content) for e in entries] == [["MARK-1", "MARK-2"]]

    ws = configured / "data" / "workspace" / "shared"
    before = (ws / "memory" / "MEMORY.md").read_text()  # the workspace template's
    change = versions.change(ws, {"MEMORY.md": lambda t: t + "- blue bike\n"}, "test")
    assert change is not None
    log = json.loads(cli("memory", "log", "--json").stdout)
    assert [v["id"] for v in log["versions"]] == [change.id]
    shown = cli("memory", "show", change.id[:12])
    assert "+- blue bike" in shown.stdout
    assert cli("memory", "undo", change.id).exit_code == 0
    assert (ws / "memory" / "MEMORY.md").read_text() == before
    again = cli("memory", "undo", change.id)
    assert again.exit_code == 1 and "changed after" in again.output
