"""Unattended exec runs in a bubblewrap sandbox: workspace writable, secrets hidden, no network."""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from vikingbot.config.schema import Config
from vikingbot.errors import ToolError
from vikingbot.session.types import SessionKey
from vikingbot.tools import sandbox
from vikingbot.tools.base import ToolContext
from vikingbot.tools.shell import ExecTool

needs_bwrap = pytest.mark.skipif(
    sandbox.available() is None,
    reason=f"no usable sandbox: {sandbox.unavailable_reason()} (.ci/run installs bubblewrap)",
)


def _ctx(workspace: Path, *, unattended: bool, **exec_cfg: object) -> ToolContext:
    config = Config.model_validate({"bot": {"tools": {"exec": exec_cfg}}})
    meta = {"unattended": True} if unattended else {}
    return ToolContext(workspace, SessionKey("cron", "default", "j"), config, metadata=meta)


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox gives /tmp a fresh empty folder, which proves nothing)."""
    root = Path(tempfile.mkdtemp(prefix="vb-sandbox-", dir="/var/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def vb_home(base: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = base / "vikingbot-home"
    home.mkdir()
    (home / "config.json").write_text('{"bot": {"gateway": {"token": "s3cret"}}}')
    monkeypatch.setenv("VIKINGBOT_HOME", str(home))
    return home


@pytest.fixture
def workspace(vb_home: Path) -> Path:
    ws = vb_home / "workspace"  # inside the hidden home, as by default: still writable
    ws.mkdir()
    return ws


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        yield srv.getsockname()[1]


@needs_bwrap
async def test_the_workspace_is_writable(workspace: Path) -> None:
    out = await ExecTool().run(
        {"command": "echo hi > made.txt && cat made.txt"}, _ctx(workspace, unattended=True)
    )
    assert out == "exit code: 0\nhi"
    assert (workspace / "made.txt").read_text() == "hi\n"


@needs_bwrap
async def test_outside_the_workspace_is_read_only_and_secrets_hidden(
    workspace: Path, vb_home: Path, base: Path
) -> None:
    ctx = _ctx(workspace, unattended=True, restrict_to_workspace=False)  # the sandbox alone
    outside = base / "outside.txt"
    wrote = await ExecTool().run({"command": f"touch {outside}; echo rc=$?"}, ctx)
    assert "rc=1" in wrote and not outside.exists()
    read = await ExecTool().run({"command": f"cat {vb_home}/config.json; echo rc=$?"}, ctx)
    assert "s3cret" not in read and "rc=1" in read
    wiped = await ExecTool().run({"command": f"find {base} -delete; echo done"}, ctx)
    assert "done" in wiped and (vb_home / "config.json").exists()


@needs_bwrap
async def test_the_environment_starts_empty(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: API keys in the gateway's environment never reach an unattended command."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-leak")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("LC_TIME", "C")
    monkeypatch.setenv("TZ", "Europe/Berlin")
    ctx = _ctx(workspace, unattended=True, env={"GIT_AUTHOR_NAME": "Bot"})
    out = await ExecTool().run({"command": "env"}, ctx)
    assert out.startswith("exit code: 0\n"), out
    seen = dict(line.split("=", 1) for line in out.splitlines()[1:])
    # the shell adds PWD (and may add SHLVL and _) itself; everything else is ours
    shell_own = {"PWD", "SHLVL", "_", "OLDPWD"}
    assert set(seen) - shell_own == {
        "PATH", "HOME", "TMPDIR", "LANG", "LC_TIME", "TZ", "GIT_AUTHOR_NAME"
    }  # fmt: skip
    assert seen["HOME"] == str(workspace.resolve())
    assert (seen["TZ"], seen["GIT_AUTHOR_NAME"]) == ("Europe/Berlin", "Bot")
    assert "leak" not in out


@needs_bwrap
async def test_no_network_unless_allowed(workspace: Path, listener: int) -> None:
    connect = f"bash -c 'echo > /dev/tcp/127.0.0.1/{listener}' && echo connected"
    cut = _ctx(workspace, unattended=True, restrict_to_workspace=False)
    closed = await ExecTool().run({"command": connect}, cut)
    assert "connected" not in closed and "exit code: 1" in closed, closed
    allowed = _ctx(workspace, unattended=True, sandbox_network=True, restrict_to_workspace=False)
    opened = await ExecTool().run({"command": connect}, allowed)
    assert opened == "exit code: 0\nconnected"


async def test_someone_present_runs_outside_the_sandbox_by_default(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    ctx = _ctx(workspace, unattended=False, restrict_to_workspace=False)
    assert (await ExecTool().run({"command": f"touch {outside}"}, ctx)).startswith("exit code: 0")
    assert outside.exists()


async def test_unattended_exec_is_refused_without_a_sandbox(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(workspace))  # no bwrap to be found
    sandbox.available.cache_clear()
    try:
        with pytest.raises(ToolError, match="only in an OS sandbox"):
            await ExecTool().run(
                {"command": "echo hi > made.txt"}, _ctx(workspace, unattended=True)
            )
    finally:
        monkeypatch.undo()
        sandbox.available.cache_clear()
    assert not (workspace / "made.txt").exists()
