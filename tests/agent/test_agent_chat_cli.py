"""`vikingbot chat` through the real CLI against the fake OpenAI server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from vikingbot.cli.app import app
from vikingbot.providers import NO_PROVIDER
from vikingbot.session.store import SessionStore
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

Invoke = Callable[..., Result]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("VIKINGBOT_HOME", str(home))
    for var in ("VIKINGBOT_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return home


def write_config(home: Path, bot: dict[str, Any]) -> None:
    (home / "config.json").write_text(json.dumps({"bot": bot}))


@pytest.fixture
def cli(home: Path, fake_openai: FakeOpenAI) -> Invoke:
    write_config(
        home,
        {
            "agents": {"provider": "openai", "model": "gpt-test"},
            "providers": {"openai": {"apiBase": fake_openai.base_url, "apiKey": "sk-test"}},
        },
    )

    def invoke(*args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(app, ["chat", *args], input=input)

    return invoke


def sessions(home: Path) -> SessionStore:
    return SessionStore(home / "data" / "sessions")


def test_no_provider_says_what_to_set(home: Path) -> None:
    write_config(home, {})
    result = CliRunner().invoke(app, ["chat", "-m", "hi"])
    assert result.exit_code == 1
    assert NO_PROVIDER in " ".join(result.stderr.split())


def test_one_shot_prints_the_reply_and_keeps_history(
    cli: Invoke, fake_openai: FakeOpenAI, home: Path
) -> None:
    fake_openai.script([reply("Hello from the fake.")])
    result = cli("-m", "hi there")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Hello from the fake.\n"
    assert fake_openai.requests[0].last_user_text == "hi there"
    store = sessions(home)
    meta = store.get_meta("cli:default:local")
    assert meta is not None and meta.skip_heartbeat
    assert [m.content for m in store.read_messages("cli:default:local")] == [
        "hi there",
        "Hello from the fake.",
    ]


def test_one_shot_json(cli: Invoke, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        [
            tool_call("list_dir", {}),
            tool_call("exec", {"command": "touch x"}),
            reply("Done.", tokens_in=50, tokens_out=2),
        ]
    )
    result = cli("-m", "look around", "-s", "cli:default:script", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["reply"] == "Done."
    assert data["ended"] == "final"
    assert data["model_calls"] == 3
    assert data["tokens_out"] >= 2
    assert [(c["name"], c["approved"]) for c in data["tool_calls"]] == [
        ("list_dir", True),
        ("exec", False),  # nobody to ask when stdin is not a terminal
    ]
    assert "bot.tools.auto_approve" in data["tool_calls"][1]["result"]
    assert set(data) >= {"reply", "ended", "tool_calls", "tokens_in", "tokens_out", "model_calls"}


def test_one_shot_provider_error_exits_1(cli: Invoke, fake_openai: FakeOpenAI) -> None:
    from vikingbot.testing.fake_openai import error

    fake_openai.script([error(401)])
    result = cli("-m", "hi")
    assert result.exit_code == 1
    assert "API key was rejected (401)" in result.stderr


def test_interactive_session_with_markdown_tools_and_approval(
    cli: Invoke, fake_openai: FakeOpenAI, home: Path
) -> None:
    fake_openai.script(
        [
            reply("**Hi!** I am here."),
            tool_call("exec", {"command": "echo hi > made.txt"}),
            reply("Made it."),
        ]
    )
    result = cli(input="hello\n\nplease make a file\ny\n/exit\n")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "Hi! I am here." in out and "**Hi!**" not in out  # Markdown rendered
    assert "Allow exec(command='echo hi > made.txt')? [y/N]" in out
    assert "⚙ exec(command='echo hi > made.txt')" in out
    assert "Made it." in out
    assert (home / "data" / "workspace" / "shared" / "made.txt").read_text() == "hi\n"
    history = sessions(home).read_messages("cli:default:local")
    assert [m.content for m in history if m.role == "user"] == ["hello", "please make a file"]


def test_interactive_decline_and_eof_quits(cli: Invoke, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([tool_call("write_file", {"path": "a", "content": "b"}), reply("OK, not.")])
    result = cli(input="write a\nn\n")  # then end of input: quit
    assert result.exit_code == 0
    assert "refused" in result.stdout
    assert "OK, not." in result.stdout


def test_bad_session_key_is_a_usage_error(cli: Invoke) -> None:
    result = cli("-m", "hi", "-s", "nocolon")
    assert result.exit_code == 2
    assert "bad session key" in result.stderr


def test_ctrl_c_cancels_the_turn_not_the_program(
    home: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    write_config(
        home,
        {
            "agents": {"provider": "openai", "model": "gpt-test"},
            "providers": {"openai": {"apiBase": fake_openai.base_url, "apiKey": "sk-test"}},
        },
    )
    fake_openai.script([reply("too slow", delay_s=3), reply("Still here.")])
    env = {**os.environ, "VIKINGBOT_HOME": str(home), "COLUMNS": "100"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vikingbot", "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write("first\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 120  # the first model call imports the SDK
        while not fake_openai.requests:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C does
        proc.stdin.write("second\n/exit\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "turn cancelled" in out
    assert "Still here." in out
    assert "too slow" not in out
