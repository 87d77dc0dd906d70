"""The real Claude Code ACP adapter (``@zed-industries/claude-agent-acp``) through the acp loop,
against the fake Anthropic server: no network beyond the npm registry for the install.

The adapter is installed with npm into ``VIKINGBOT_ACP_NPM_DIR`` (default
``~/.cache/vikingbot/claude-agent-acp``; ``.ci/run`` does it ahead). When it
cannot be installed the test is skipped with npm's error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vikingbot.agent.acp_loop import AcpLoop
from vikingbot.config.schema import Config
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_anthropic import FakeAnthropic, reply

pytest.importorskip("acp")
PACKAGE = "@zed-industries/claude-agent-acp@0.23.1"


def adapter() -> Path:
    root = Path(
        os.environ.get("VIKINGBOT_ACP_NPM_DIR")
        or Path.home() / ".cache" / "vikingbot" / "claude-agent-acp"
    )
    binary = root / "node_modules" / ".bin" / "claude-agent-acp"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed, so {PACKAGE} cannot be installed")
    root.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [npm, "install", "--prefix", str(root), "--no-audit", "--no-fund", PACKAGE],
            capture_output=True,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"installing {PACKAGE} took over 300 s")
    if done.returncode != 0 or not binary.exists():
        pytest.skip(f"{PACKAGE} could not be installed: {done.stderr.strip()[-500:]}")
    return binary


async def test_claude_code_answers_a_chat_turn_through_acp(tmp_path: Path) -> None:
    binary = adapter()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "SOUL.md").write_text("I am Ragnar.\n")
    with FakeAnthropic.start() as fake:
        fake.script([reply("Hello from the fake Claude.")])
        env = {
            "ANTHROPIC_BASE_URL": fake.base_url,
            "ANTHROPIC_API_KEY": "sk-test",
            "HOME": str(tmp_path / "home"),
        }
        if os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"  # Claude Code refuses its permission bypass as root otherwise
        config = Config.model_validate(
            {
                "bot": {
                    "agents": {
                        "loop": "acp",
                        "acp": {"command": str(binary), "env": env, "startupTimeoutS": 120},
                    }
                }
            }
        )
        sessions = SessionStore(tmp_path / "sessions")
        loop = AcpLoop(config, sessions=sessions)
        assert loop.readiness().ready
        key = SessionKey("telegram", "default", "42")
        try:
            result = await loop.run_turn(
                "say hi", key, {"workspace": str(workspace), "timeout_s": 180}
            )
        finally:
            await loop.aclose()
        assert (result.ended, result.error) == ("final", None)
        assert result.text == "Hello from the fake Claude."
        sent = " ".join(r.text for r in fake.requests)
        assert "say hi" in sent and "I am Ragnar." in sent  # our prompt and context reached it
        assert [m.content for m in sessions.read_messages(key)] == [
            "say hi",
            "Hello from the fake Claude.",
        ]
