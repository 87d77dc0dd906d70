"""The README's quickstart lines, in order, with a gateway already running (issue 30).

`vikingbot gateway` starts on a home with no provider; in a second terminal the
user runs the README's `config set` lines (provider, model, key). The running
gateway takes all three without a restart: the first `chat -m` answers, and
`doctor` reports the running gateway's readiness, not the shell's.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll
from vikingbot.testing.fake_openai import FakeOpenAI, reply

README = (Path(__file__).parents[2] / "README.md").read_text("utf-8")
KEY = "sk-readme-e2e"


def readme_lines() -> list[list[str]]:
    """The quickstart's `config set` lines for the model, as the README writes them."""
    wanted = ("bot.agents.provider", "bot.agents.model", "bot.providers.openai.api_key")
    found = [line.split()[3:] for line in README.splitlines() if line.startswith("uv run ")]
    return [x for x in found if x[:2] == ["config", "set"] and len(x) == 4 and x[2] in wanted]


def doctor_agent(home: Home) -> dict[str, str]:
    """`doctor`'s agent row, once its gateway row says the gateway answered (a loaded
    machine may let /health take longer than doctor's 3 s once)."""

    def rows() -> dict[str, dict[str, str]] | None:
        checks = {c["name"]: c for c in json.loads(home.cli("doctor", "--json").stdout)["checks"]}
        return checks if checks["gateway"]["message"].startswith("running") else None

    return poll(rows, "doctor seeing the gateway")["agent"]


def test_the_readme_lines_reach_a_running_gateway(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    lines = readme_lines()
    assert [x[2] for x in lines] == [
        "bot.agents.provider",
        "bot.agents.model",
        "bot.providers.openai.api_key",
    ]
    (home.path / "config.json").write_text(
        json.dumps({"bot": {"channels": {"telegram": {"enabled": False}}}})
    )
    with FakeOpenAI.start(require_key=KEY) as llm:
        llm.default = reply("Hello from the model.")
        gw = gateways(home)
        agent = doctor_agent(home)
        assert agent["status"] == "fail" and "running gateway" in agent["message"]
        # the one line the README does not have: the model server is a loopback fake
        assert (
            home.cli("config", "set", "bot.providers.openai.api_base", llm.base_url).returncode == 0
        )
        for line in lines:
            value = KEY if line[2].endswith("api_key") else line[3]
            done = home.cli(*line[:3], value)
            assert done.returncode == 0, done.stderr
            assert KEY not in done.stderr  # never printed back

        def answered() -> str | None:
            res = home.cli("chat", "-m", "hi", "--json")
            return res.stdout if res.returncode == 0 else None

        chat = json.loads(poll(answered, "the first chat through the gateway"))
        assert chat["via"] == "gateway" and chat["reply"] == "Hello from the model."
        assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in llm.requests)
        agent = doctor_agent(home)
        assert agent["status"] == "ok", agent
        assert f"pid {gw.proc.pid}" in agent["message"]  # type: ignore[union-attr]


def test_a_key_written_to_the_homes_env_file_reaches_a_running_gateway(
    home: Home, gateways: Callable[[Home], GatewayProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`<home>/.env` is re-read when it changes: a key added after the gateway started
    answers the next chat, and a key changed there replaces the old one."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a real variable would win
    with FakeOpenAI.start(require_key=KEY) as llm:
        llm.default = reply("Hello from the model.")
        home.write_config(providers={"openai": {"api_base": llm.base_url, "max_retries": 0}})
        gateways(home)
        first = home.cli("chat", "-m", "hi", "--json")
        assert first.returncode != 0 and "401" in first.stderr + first.stdout, first
        env_file = home.path / ".env"
        env_file.write_text(f"# the model's key\nOPENAI_API_KEY={KEY}\n")

        def chat() -> subprocess.CompletedProcess[str]:
            return home.cli("chat", "-m", "hi", "--json")

        answered = poll(lambda: (r := chat()).returncode == 0 and r, "the key from .env")
        assert json.loads(answered.stdout)["reply"] == "Hello from the model."
        assert llm.requests[-1].headers.get("authorization") == f"Bearer {KEY}"

        env_file.write_text("OPENAI_API_KEY=sk-revoked\n")
        refused = poll(lambda: (r := chat()).returncode != 0 and r, "the changed key")
        assert "401" in refused.stderr + refused.stdout
        assert llm.requests[-1].headers.get("authorization") == "Bearer sk-revoked"


def test_status_reports_the_running_gateways_agent_and_says_so(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is in the gateway's environment only: `status` run in another shell
    shows the gateway ready (its own answer), and without the gateway, this shell's."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    home.write_config(providers={"openai": {}})  # the vendor's endpoint: a key is needed
    shell = home.cli_json("status")["agent"]
    assert (shell["ready"], shell["checked"]) == (False, "shell")
    with GatewayProcess(home.path, env={"OPENAI_API_KEY": KEY}) as gw:
        data = home.cli_json("status")
        assert data["agent"]["ready"] is True and data["agent"]["checked"] == "gateway"
        assert data["agent"]["detail"] == "openai / fake-model"
        text = home.cli("status").stdout
        assert f"✓ builtin: openai / fake-model (in the running gateway, pid {gw.proc.pid})" in (  # type: ignore[union-attr]
            text
        ), text
    text = home.cli("status").stdout
    assert "✗ builtin: openai / fake-model (in this shell's environment)" in text, text
    assert "needs an API key" in text
