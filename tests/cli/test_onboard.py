"""`vikingbot onboard` in a real pseudo-terminal against the fake model server: the
defaults lead to a working home, a secret is never echoed, Ctrl-C changes nothing."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from vikingbot.testing.fake_openai import FakeOpenAI

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\r")
SECRET = "sk-onboard-very-secret-123"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as f:
        yield f


def spawn(home: Path, *args: str, **env: str) -> pexpect.spawn:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VIKINGBOT_", "OPENAI_"))}
    # PROMPT_TOOLKIT_NO_CPR: pexpect does not answer the cursor-position request a real
    # terminal answers at once; without it every question waits the request out
    clean.update(
        {"VIKINGBOT_HOME": str(home), "TERM": "xterm", "TZ": "UTC", "PROMPT_TOOLKIT_NO_CPR": "1"}
    )
    clean.update(env)
    clean["PATH"] = os.path.dirname(sys.executable)  # no npx/gemini: the builtin loop only
    return pexpect.spawn(
        sys.executable,
        ["-m", "vikingbot", "onboard", *args],
        env=clean,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 120),
    )


def answer(child: pexpect.spawn, question: str, text: str = "") -> None:
    child.expect(question)
    child.send(text + "\r")


def screen(child: pexpect.spawn) -> str:
    return ANSI.sub("", child.before or "")


def test_defaults_and_a_key_make_a_home_that_answers(tmp_path: Path, fake: FakeOpenAI) -> None:
    home = tmp_path / "home ä"
    child = spawn(home)
    seen: list[str] = []
    answer(child, "Agent loop")
    answer(child, "Model provider")
    answer(child, "Model")
    answer(child, "API base URL", fake.base_url)
    answer(child, "API key", SECRET)
    child.expect("the model answered")
    seen.append(screen(child))
    answer(child, "Chat platform")
    answer(child, "Timezone")
    answer(child, "Task for HEARTBEAT.md", "daily: 08:30 title: Brief task: Morning brief.")
    answer(child, "Run the gateway as a service")
    child.expect(pexpect.EOF)
    seen.append(screen(child))
    child.close()
    assert child.exitstatus == 0, "".join(seen)
    assert SECRET not in "".join(seen)
    raw = json.loads((home / "config.json").read_text())
    agents = raw["bot"]["agents"]
    assert (agents["loop"], agents["provider"], agents["model"]) == (
        "builtin",
        "openai",
        "gpt-4o-mini",
    )
    openai = raw["bot"]["providers"]["openai"]
    assert (openai["api_key"], openai["api_base"]) == (SECRET, fake.base_url)
    assert raw["bot"]["heartbeat"]["timezone"] == "UTC"
    assert (home / "config.json").stat().st_mode & 0o077 == 0  # the key: owner only
    md = (home / "data" / "workspace" / "shared" / "HEARTBEAT.md").read_text()
    assert "- daily: 08:30 title: Brief task: Morning brief." in md
    assert md.index("## Active Tasks") < md.index("Morning brief") < md.index("## Completed")
    assert fake.requests, "the key was tested with one real call"


def test_a_bad_answer_is_asked_again(tmp_path: Path, fake: FakeOpenAI) -> None:
    home = tmp_path / "home"
    child = spawn(home, "--no-check")
    answer(child, "Agent loop", "wizard")
    child.expect("please answer one of: builtin")
    answer(child, "Agent loop")
    answer(child, "Model provider")
    answer(child, "Model")
    answer(child, "API base URL", fake.base_url)
    answer(child, "API key")
    answer(child, "Chat platform")
    answer(child, "Timezone", "Mars/Olympus")
    child.expect("not an IANA timezone")
    answer(child, "Timezone", "Europe/Berlin")
    answer(child, "Task for HEARTBEAT.md", "every: sometimes title: X task: y")
    answer(child, "Task for HEARTBEAT.md")
    answer(child, "Run the gateway as a service", "n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    raw = json.loads((home / "config.json").read_text())
    assert raw["bot"]["heartbeat"]["timezone"] == "Europe/Berlin"
    assert fake.requests == []  # --no-check: no call


def test_ctrl_c_at_any_question_changes_nothing(tmp_path: Path, fake: FakeOpenAI) -> None:
    home = tmp_path / "home"
    home.mkdir()
    before = '{"bot": {"agents": {"provider": "anthropic", "model": "m"}}}\n'
    (home / "config.json").write_text(before)
    child = spawn(home, "--no-check")
    answer(child, "Agent loop")
    answer(child, "Model provider", "openai")
    # the model question drawn to its end (the cursor shown again), not the echo of the
    # provider's line: the Ctrl-C reaches a prompt that is waiting for keys
    child.expect(r"Model \[gpt-4o-mini\]:[^\n]*\x1b\[\?25h")
    child.sendintr()
    child.expect("cancelled: nothing was changed")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert (home / "config.json").read_text() == before
    assert not (home / "data").exists()


def test_non_interactive(tmp_path: Path, fake: FakeOpenAI) -> None:
    from typer.testing import CliRunner

    from vikingbot.cli.app import app

    home = tmp_path / "home"
    env = {"VIKINGBOT_HOME": str(home), "OPENAI_API_KEY": "sk-from-env"}
    args = ["onboard", "--provider", "openai", "--api-base", fake.base_url, "--timezone", "UTC"]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    raw = json.loads((home / "config.json").read_text())
    assert raw["bot"]["agents"]["provider"] == "openai"
    assert "api_key" not in raw["bot"]["providers"]["openai"]  # it stays in the environment
    assert fake.requests  # tested with the environment's key
    bad = CliRunner().invoke(
        app, ["onboard", "--non-interactive", "--timezone", "Nowhere"], env=env
    )
    assert bad.exit_code == 2 and "not an IANA timezone" in bad.output


def test_the_key_already_stored_is_the_one_tested(tmp_path: Path, fake: FakeOpenAI) -> None:
    """Re-running onboard with no key typed or exported tests the stored key, as the
    gateway will use it (not the masked form a dump of the config shows)."""
    from typer.testing import CliRunner

    from vikingbot.cli.app import app

    home = tmp_path / "home"
    home.mkdir()
    stored = {"bot": {"providers": {"openai": {"api_key": "sk-stored-1"}}}}
    (home / "config.json").write_text(json.dumps(stored))
    args = ["onboard", "--provider", "openai", "--api-base", fake.base_url]
    result = CliRunner().invoke(app, args, env={"VIKINGBOT_HOME": str(home)})
    assert result.exit_code == 0, result.output
    assert fake.requests[-1].headers.get("authorization") == "Bearer sk-stored-1"


def test_dumb_terminal_push_notifications_and_no_service_manager(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """TERM=dumb: the key is not echoed; `notify` is offered and makes the owner a push
    target; yes to the service on a system without a user service manager writes the
    settings, exits 0 and names the command to run the gateway."""
    home = tmp_path / "home"
    child = spawn(home, TERM="dumb")
    seen: list[str] = []
    answer(child, "Agent loop")
    answer(child, "Model provider")
    answer(child, "Model")
    answer(child, "API base URL", fake.base_url)
    answer(child, "API key", SECRET)
    child.expect("the model answered")
    seen.append(screen(child))
    answer(child, "Chat platform", "notify")
    answer(child, "Push URL", "not a url")
    child.expect("not an Apprise URL")
    seen.append(screen(child))
    answer(child, "Push URL", "ntfys://ntfy.sh/my-secret-topic")
    answer(child, "Timezone")
    answer(child, "Task for HEARTBEAT.md")
    answer(child, "Run the gateway as a service", "y")
    child.expect(pexpect.EOF)
    seen.append(screen(child))
    child.close()
    out = "".join(seen)
    assert child.exitstatus == 0, out
    assert SECRET not in out and "my-secret-topic" not in out
    asked = "".join(seen[:2])  # the questions (and the key test between them)
    assert "| INFO" not in asked and "migration" not in asked  # no log lines among them
    assert "the settings are written" in out
    assert "vikingbot gateway`" in out  # as it was typed, not the venv's python --config
    raw = json.loads((home / "config.json").read_text())
    assert raw["bot"]["owner"] == "notify:phone"
    notify = raw["bot"]["channels"]["notify"]
    assert notify["enabled"] is True
    assert notify["targets"] == {"phone": "ntfys://ntfy.sh/my-secret-topic"}


def test_enter_keeps_the_stored_key_and_ctrl_c_after_the_test_leaves_nothing(
    tmp_path: Path,
) -> None:
    """A re-run says Enter keeps the stored key, tests it, and keeps it; Ctrl-C after the
    key test (a later question) leaves the home as it was: no workspace, no database."""
    home = tmp_path / "home"
    home.mkdir()
    with FakeOpenAI.start(require_key="sk-stored-1") as fake:
        stored = {"bot": {"providers": {"openai": {"api_key": "sk-stored-1"}}}}
        before = json.dumps(stored)
        (home / "config.json").write_text(before)
        child = spawn(home)
        answer(child, "Agent loop")
        answer(child, "Model provider")
        answer(child, "Model")
        answer(child, "API base URL", fake.base_url)
        child.expect("Enter: keep the stored key")
        child.send("\r")
        child.expect("the model answered")
        child.expect(r"Chat platform[^\n]*\x1b\[\?25h")
        child.sendintr()
        child.expect("cancelled: nothing was changed")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 1
        assert (home / "config.json").read_text() == before
        assert sorted(p.name for p in home.iterdir()) == ["config.json"]
        assert fake.requests[-1].headers.get("authorization") == "Bearer sk-stored-1"

        child = spawn(home, "--no-check")
        for question in ("Agent loop", "Model provider", "Model", "API base URL"):
            answer(child, question)
        answer(child, "Enter: keep the stored key")
        for question in ("Chat platform", "Timezone", "Task for HEARTBEAT.md"):
            answer(child, question)
        answer(child, "Run the gateway as a service", "n")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
        raw = json.loads((home / "config.json").read_text())
        assert raw["bot"]["providers"]["openai"]["api_key"] == "sk-stored-1"
