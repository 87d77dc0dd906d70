"""The exec tool: runs in the workspace, bounded, and refuses destructive commands."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from vikingbot.errors import ToolError
from vikingbot.tools.base import ToolContext
from vikingbot.tools.shell import ExecTool, denied, escapes_workspace


async def test_runs_in_the_workspace(workspace: Path, ctx: ToolContext) -> None:
    out = await ExecTool().run({"command": "pwd; echo err >&2; exit 4"}, ctx)
    lines = out.splitlines()
    assert lines[0] == "exit code: 4"
    assert Path(lines[1]).resolve() == workspace.resolve()
    assert "err" in lines


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -rf ~",
        "sudo rm -fr /*",
        "rm -r -f $HOME",
        "cd x && rm -rf .",
        "rm --recursive --force /etc",
        "rm -rf --no-preserve-root /",
        "mkfs.ext4 /dev/sda1",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "echo hi > /dev/sda",
        ":(){ :|:& };:",
        "shutdown -h now",
        "sudo reboot",
        "ls; poweroff",
        "systemctl reboot",
        "chmod -R 777 /",
    ],
)
def test_destructive_commands_are_denied(command: str) -> None:
    assert denied(command, []) is not None


@pytest.mark.parametrize(
    "command",
    ["rm -rf build", "rm -f notes.tmp", "ls -la", "echo reboot-notes.md", "git status", "df -h"],
)
def test_ordinary_commands_pass_the_deny_list(command: str) -> None:
    assert denied(command, []) is None


async def test_configured_deny_patterns(ctx: ToolContext) -> None:
    ctx.config.bot.tools.exec.deny_patterns = [r"\bgit\s+push\b"]
    with pytest.raises(ToolError, match=r"deny_patterns entry '\\\\bgit\\\\s\+push\\\\b'"):
        await ExecTool().run({"command": "git push origin main"}, ctx)
    assert denied("git status", [r"\bgit\s+push\b"]) is None
    assert "not a valid regex" in (denied("ls", ["("]) or "")


async def test_denied_command_never_runs(workspace: Path, ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="blocked: recursive delete"):
        await ExecTool().run({"command": "touch ran; rm -rf *"}, ctx)
    assert not (workspace / "ran").exists()


def test_workspace_confinement_heuristic(workspace: Path) -> None:
    assert escapes_workspace("cat ../secret", workspace)
    assert escapes_workspace("cat /etc/passwd", workspace)
    assert escapes_workspace("ls x && cd ..", workspace)
    assert escapes_workspace(f"cat {workspace}/a.md > /dev/null", workspace) is None
    assert escapes_workspace("python3 -c 'print(1)' 2>/dev/null", workspace) is None
    assert escapes_workspace("ls ..hidden", workspace) is None


async def test_outside_paths_refused_unless_unrestricted(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        await ExecTool().run({"command": "cat /etc/hostname"}, ctx)
    ctx.config.bot.tools.exec.restrict_to_workspace = False
    out = await ExecTool().run({"command": "cat /etc/hostname"}, ctx)
    assert out.startswith("exit code: 0")


async def test_timeout_kills_the_command(ctx: ToolContext) -> None:
    ctx.config.bot.tools.exec.timeout_s = 0.3
    started = time.monotonic()
    out = await ExecTool().run({"command": "sleep 20"}, ctx)
    assert out.startswith("timed out after 0.3s")
    assert time.monotonic() - started < 5


async def test_background_children_do_not_hold_the_turn(ctx: ToolContext) -> None:
    started = time.monotonic()
    out = await ExecTool().run({"command": "sleep 20 & echo started"}, ctx)
    assert out == "exit code: 0\nstarted"
    assert time.monotonic() - started < 5


async def test_output_is_capped(ctx: ToolContext) -> None:
    ctx.config.bot.tools.exec.max_output_chars = 100
    ctx.config.bot.tools.exec.restrict_to_workspace = False
    cmd = f"{sys.executable} -c \"print('x' * 50000)\""
    out = await ExecTool().run({"command": cmd}, ctx)
    assert "[... output truncated: about 49901 more characters]" in out
    assert len(out) < 300
