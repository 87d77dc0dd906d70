"""The interactive `vikingbot chat` in a real pseudo-terminal, against the scripted model
server on loopback: line editing, history (Up-arrow, across runs, private file), the
spinner, SDK retries told, Ctrl-C cancelling a turn, errors printed once."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.chat_terminal import LEFT, UP, Terminal
from tests.support.home import poll
from vikingbot.session.store import SessionStore
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply

SESSION = "cli:default:local"


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as fake:
        yield fake


@pytest.fixture
def home(tmp_path: Path, llm: FakeOpenAI) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    write_config(home, llm)
    return home


def write_config(home: Path, llm: FakeOpenAI, **provider: Any) -> None:
    bot = {
        "agents": {"provider": "openai", "model": "gpt-test"},
        "providers": {
            "openai": {"apiBase": llm.base_url, "apiKey": "sk-test", "maxRetries": 0, **provider}
        },
    }
    (home / "config.json").write_text(json.dumps({"bot": bot}))


@pytest.fixture
def chat(home: Path) -> Iterator[Terminal]:
    term = Terminal.start(home)
    yield term
    term.close()


def history(home: Path) -> list[tuple[str, str]]:
    return [
        (m.role, m.content) for m in SessionStore(home / "data" / "sessions").read_messages(SESSION)
    ]


def test_line_editing_and_history_recalled_with_up_arrow_in_the_next_run(
    home: Path, llm: FakeOpenAI, chat: Terminal
) -> None:
    llm.script([reply("Hi there!"), reply("Hi again!")])
    at = chat.prompt()
    chat.send("helo" + LEFT + "l")  # fix the typo in place: cursor back one, insert
    chat.send("\r")
    chat.wait_for(r"Hi there!", after=at)
    assert llm.requests[0].last_user_text == "hello"
    chat.prompt(at)
    chat.ctrl_d()
    assert chat.wait_exit() == 0

    path = home / "state" / "chat_history"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "+hello" in path.read_text()

    again = Terminal.start(home)
    try:
        at = again.prompt()
        again.send(UP)  # the line from the last run comes back
        again.wait_for(r"you› hello", after=at - 5)
        again.send("\r")
        again.wait_for(r"Hi again!", after=at)
        assert llm.requests[1].last_user_text == "hello"
    finally:
        again.close()


def test_spinner_shows_elapsed_time_and_ctrl_c_cancels_the_turn_at_once(
    home: Path, llm: FakeOpenAI, chat: Terminal
) -> None:
    llm.script([reply("far too late", delay_s=60), reply("Still here.")])
    at = chat.prompt()
    chat.line("take your time")
    chat.wait_for(r"working · [1-9]\d*s", after=at)  # the spinner counts the seconds
    poll(lambda: llm.requests, "the turn to reach the model")
    chat.ctrl_c()
    chat.wait_for(r"turn cancelled", after=at)
    at = chat.prompt(at)
    # the prompt is kept, no half reply
    assert history(home) == [("user", "take your time")]
    chat.line("are you there?")
    chat.wait_for(r"Still here\.", after=at)
    assert "far too late" not in chat.text
    chat.prompt(at)
    chat.ctrl_c()  # at the prompt: quit
    assert chat.wait_exit() == 0


def test_an_error_is_printed_once_with_no_log_line(
    home: Path, llm: FakeOpenAI, chat: Terminal
) -> None:
    llm.script([error(401)])
    at = chat.prompt()
    chat.line("hi")
    chat.wait_for(r"Error: .*API key was rejected \(401\)", after=at)
    chat.prompt(at)
    assert chat.text.count("API key was rejected") == 1
    assert "ERROR" not in chat.text
    # the story is in the chat's log file instead
    log = (home / "data" / "logs" / "chat.log").read_text()
    assert "API key was rejected" in log
    assert history(home) == [("user", "hi")]


def test_each_sdk_retry_is_one_line_then_the_answer(home: Path, llm: FakeOpenAI) -> None:
    write_config(home, llm, maxRetries=2)
    llm.script([error(503), error(503), reply("Made it.")])
    chat = Terminal.start(home)
    try:
        at = chat.prompt()
        chat.line("hello")
        chat.wait_for(r"Made it\.", after=at)
        lines = [ln for ln in chat.text[at:].splitlines() if "retrying" in ln]
        assert [ln.split("↻")[-1].strip() for ln in lines] == [
            "the model API answered 503; retrying in 0.0 s (retry 1 of 2)",
            "the model API answered 503; retrying in 0.0 s (retry 2 of 2)",
        ]
    finally:
        chat.close()


def test_ctrl_c_at_an_approval_question_cancels_the_turn(
    home: Path, llm: FakeOpenAI, chat: Terminal
) -> None:
    from vikingbot.testing.fake_openai import tool_call

    llm.script([tool_call("exec", {"command": "touch x"}), reply("Next one.")])
    at = chat.prompt()
    chat.line("make a file")
    chat.wait_for(r"Allow exec\(command='touch x'\)\? \[y/N\]", after=at)
    chat.wait_raw()
    chat.ctrl_c()
    chat.wait_for(r"turn cancelled", after=at)
    at = chat.prompt(at)
    assert not (home / "data" / "workspace" / "shared" / "x").exists()
    chat.line("next")
    chat.wait_for(r"Next one\.", after=at)


def test_one_shot_error_is_one_line_on_stderr(home: Path, llm: FakeOpenAI) -> None:
    import os
    import subprocess
    import sys

    llm.script([error(401)])
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    env["VIKINGBOT_HOME"] = str(home)
    res = subprocess.run(
        [sys.executable, "-m", "vikingbot", "chat", "-m", "hi"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1
    assert res.stdout == ""
    assert [ln for ln in res.stderr.splitlines() if "rejected" in ln] == [
        "Error: the openai API key was rejected (401); set bot.providers.openai.api_key or "
        "OPENAI_API_KEY"
    ]
    assert "ERROR" not in res.stderr


def test_one_shot_on_a_terminal_shows_the_spinner_then_the_reply(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.script([reply("Done thinking.", delay_s=60)])
    chat = Terminal.start(home, "-m", "think a little")
    try:
        chat.wait_for(r"working · [1-9]\d*s")
        llm.release()  # the answer comes once the spinner has counted a second
        chat.wait_for(r"Done thinking\.")
        assert chat.wait_exit() == 0
    finally:
        chat.close()
    assert history(home) == [("user", "think a little"), ("assistant", "Done thinking.")]
