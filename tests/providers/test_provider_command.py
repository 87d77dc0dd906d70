"""The command provider: a local program answers on stdout, bounded by a timeout."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from vikingbot.config.schema import ProviderConfig
from vikingbot.errors import NotConfiguredError, ProviderError, ProviderUnavailable
from vikingbot.providers.base import ChatMessage, ChatRequest, ToolCall
from vikingbot.providers.command import CommandProvider, render_prompt


def command(*argv: str, timeout_s: float = 10) -> CommandProvider:
    cfg = ProviderConfig(command=list(argv), timeout_s=timeout_s)
    return CommandProvider("command", cfg, environ=dict(os.environ))


def request(text: str = "what's up?") -> ChatRequest:
    msgs = [
        ChatMessage("system", "You are terse."),
        ChatMessage("user", "earlier question"),
        ChatMessage("assistant", "earlier answer"),
        ChatMessage("user", text),
    ]
    return ChatRequest(model="", messages=msgs)


async def test_stdout_is_the_reply_and_stdin_is_the_conversation(tmp_path: Path) -> None:
    seen = tmp_path / "stdin.txt"
    script = (
        "import sys, pathlib; data = sys.stdin.read(); "
        f"pathlib.Path({str(seen)!r}).write_text(data); print('  pong  ')"
    )
    resp = await command(sys.executable, "-c", script).complete(request("ping"))
    assert resp.text == "pong"
    assert resp.tool_calls == []
    assert resp.tokens_in > 0 and resp.tokens_out > 0
    stdin = seen.read_text()
    assert stdin.startswith("# System\n\nYou are terse.")
    assert "## User\n\nearlier question" in stdin
    assert "## Assistant\n\nearlier answer" in stdin
    assert stdin.rstrip().endswith("# Message\n\nping")


async def test_slow_program_is_killed_at_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        f"import os, time, pathlib; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); "
        "time.sleep(30)"
    )
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"no answer within 0.5s and was killed"):
        await command(sys.executable, "-c", script, timeout_s=0.5).complete(request())
    assert time.monotonic() - started < 5
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone


async def test_a_program_killed_by_a_signal_is_an_outage_not_an_answer() -> None:
    script = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    with pytest.raises(ProviderUnavailable, match="killed by signal 9"):
        await command(sys.executable, "-c", script).complete(request())


async def test_failing_program_reports_status_and_stderr() -> None:
    script = "import sys; sys.stderr.write('model quota exhausted\\n'); sys.exit(3)"
    with pytest.raises(ProviderError) as exc:
        await command(sys.executable, "-c", script).complete(request())
    assert "exited with status 3: model quota exhausted" in str(exc.value)


async def test_missing_program_and_missing_command() -> None:
    # a program that is not there (yet, or any more) is an outage, as an unreachable API
    with pytest.raises(ProviderUnavailable, match="no-such-agent-cli"):
        await command("no-such-agent-cli").complete(request())
    empty = CommandProvider("mine", ProviderConfig(), environ={})
    with pytest.raises(NotConfiguredError, match=r"set bot.providers.mine.command"):
        await empty.complete(request())


def test_render_prompt_shows_tool_steps() -> None:
    text = render_prompt(
        [
            ChatMessage("user", "look"),
            ChatMessage("assistant", "", tool_calls=[ToolCall("1", "list_dir", {})]),
            ChatMessage("tool", "a.md", tool_call_id="1", name="list_dir"),
            ChatMessage("user", "and now?"),
        ]
    )
    assert "(called: list_dir)" in text
    assert "## Tool result (list_dir)\n\na.md" in text
    assert "# System" not in text


async def test_a_huge_reply_is_cut_at_the_cap_and_says_so() -> None:
    cfg = ProviderConfig(
        command=[sys.executable, "-c", "import sys; sys.stdout.write('x' * 20_000_000)"],
        max_output_bytes=4096,
    )
    resp = await CommandProvider("cmd", cfg, environ=dict(os.environ)).complete(request())
    assert resp.text.startswith("x" * 4096 + "\n\n[reply cut: 19995904 more bytes")
    assert "bot.providers.cmd.max_output_bytes" in resp.text
    assert len(resp.text) < 5000
