"""File tools: what they do, and that they stay inside the workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vikingbot.errors import ToolError
from vikingbot.tools.base import ToolContext
from vikingbot.tools.fs import (
    EditFileTool,
    GlobTool,
    GrepTool,
    ListDirTool,
    ReadFileTool,
    WriteFileTool,
)


async def test_read_file_whole_and_in_parts(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "notes.md").write_text("one\ntwo\nthree\nfour\n")
    assert await ReadFileTool().run({"path": "notes.md"}, ctx) == "one\ntwo\nthree\nfour\n"
    part = await ReadFileTool().run({"path": "notes.md", "offset": 2, "limit": 2}, ctx)
    assert part.startswith("two\nthree\n")
    assert "1 more lines; read on with offset=4" in part


async def test_read_file_refuses_missing_binary_and_folders(
    workspace: Path, ctx: ToolContext
) -> None:
    (workspace / "blob").write_bytes(b"\x00\x01\x02")
    (workspace / "latin1.txt").write_bytes("café".encode("latin-1"))
    (workspace / "dir").mkdir()
    for path, why in [
        ("nope.md", "no such file"),
        ("blob", "binary"),
        ("latin1.txt", "not valid UTF-8"),
        ("dir", "is a directory"),
    ]:
        with pytest.raises(ToolError, match=why):
            await ReadFileTool().run({"path": path}, ctx)


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt", "/etc/hostname"])
async def test_paths_outside_the_workspace_are_refused(
    workspace: Path, ctx: ToolContext, path: str
) -> None:
    (workspace.parent / "secret.txt").write_text("s3cret")
    (workspace / "sub").mkdir()
    with pytest.raises(ToolError, match="outside the workspace"):
        await ReadFileTool().run({"path": path}, ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        await WriteFileTool().run({"path": path, "content": "x"}, ctx)
    assert (workspace.parent / "secret.txt").read_text() == "s3cret"


async def test_symlinks_cannot_lead_out(workspace: Path, ctx: ToolContext) -> None:
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    os.symlink(outside, workspace / "link")
    os.symlink(outside / "secret.txt", workspace / "file-link")
    for path in ("link/secret.txt", "file-link"):
        with pytest.raises(ToolError, match="outside the workspace"):
            await ReadFileTool().run({"path": path}, ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        await WriteFileTool().run({"path": "link/new.txt", "content": "x"}, ctx)
    assert not (outside / "new.txt").exists()
    assert "secret" not in await GlobTool().run({"pattern": "**/*"}, ctx)
    assert await GrepTool().run({"pattern": "s3cret"}, ctx) == "(no matches)"


async def test_without_restriction_absolute_paths_work(
    workspace: Path, ctx: ToolContext, tmp_path: Path
) -> None:
    ctx.config.bot.tools.exec.restrict_to_workspace = False
    (tmp_path / "elsewhere.txt").write_text("hi")
    assert await ReadFileTool().run({"path": str(tmp_path / "elsewhere.txt")}, ctx) == "hi"


async def test_write_file_creates_folders_and_replaces(workspace: Path, ctx: ToolContext) -> None:
    out = await WriteFileTool().run({"path": "memory/MEMORY.md", "content": "remember"}, ctx)
    assert out == "wrote 8 bytes to memory/MEMORY.md"
    await WriteFileTool().run({"path": "memory/MEMORY.md", "content": "v2"}, ctx)
    assert (workspace / "memory/MEMORY.md").read_text() == "v2"
    assert [p.name for p in (workspace / "memory").iterdir()] == ["MEMORY.md"]  # no temp left


async def test_edit_file(workspace: Path, ctx: ToolContext) -> None:
    f = workspace / "todo.md"
    f.write_text("- a\n- b\n- a\n")
    tool = EditFileTool()
    with pytest.raises(ToolError, match="occurs 2 times"):
        await tool.run({"path": "todo.md", "old_text": "- a", "new_text": "- c"}, ctx)
    with pytest.raises(ToolError, match="not found"):
        await tool.run({"path": "todo.md", "old_text": "- z", "new_text": "- c"}, ctx)
    await tool.run({"path": "todo.md", "old_text": "- b", "new_text": "- B"}, ctx)
    await tool.run(
        {"path": "todo.md", "old_text": "- a", "new_text": "- A", "replace_all": True}, ctx
    )
    assert f.read_text() == "- A\n- B\n- A\n"


async def test_list_glob_grep(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "a.md").write_text("alpha\nTODO: write\n")
    (workspace / "docs" / "b.txt").write_text("todo later\n")
    (workspace / "HEARTBEAT.md").write_text("# Heartbeat\n")
    listing = await ListDirTool().run({}, ctx)
    assert listing.splitlines() == ["HEARTBEAT.md  (12 bytes)", "docs/"]
    assert await GlobTool().run({"pattern": "**/*.md"}, ctx) == "HEARTBEAT.md\ndocs/a.md"
    hits = await GrepTool().run({"pattern": "todo", "ignore_case": True, "include": "*.md"}, ctx)
    assert hits == "docs/a.md:2: TODO: write"
    with pytest.raises(ToolError, match="may not contain"):
        await GlobTool().run({"pattern": "../*"}, ctx)
    with pytest.raises(ToolError, match="bad regular expression"):
        await GrepTool().run({"pattern": "("}, ctx)


def test_argument_check_gives_the_model_a_precise_message() -> None:
    tool = ReadFileTool()
    with pytest.raises(ToolError, match=r"missing required argument\(s\): path"):
        tool.check_args({})
    with pytest.raises(ToolError, match="argument 'limit' must be integer, got str"):
        tool.check_args({"path": "a", "limit": "10"})
    with pytest.raises(ToolError, match="must be a JSON object"):
        tool.check_args(["a"])  # type: ignore[arg-type]


async def test_heartbeat_file_edits_wait_for_the_cycle_lock(
    workspace: Path, ctx: ToolContext
) -> None:
    """The agent's edit of HEARTBEAT.md goes through the rewrite lock: it waits, then applies."""
    import asyncio

    from filelock import FileLock

    from vikingbot.fsutil import lock_path
    from vikingbot.tools.fs import EditFileTool

    path = workspace / "HEARTBEAT.md"
    path.write_text("## Active Tasks\n\n- Water the plants\n")
    lock = FileLock(str(lock_path(path)))
    lock.acquire()
    try:
        edit = asyncio.create_task(
            EditFileTool().run(
                {"path": "HEARTBEAT.md", "old_text": "plants", "new_text": "roses"}, ctx
            )
        )
        await asyncio.sleep(0.3)
        assert not edit.done()  # blocked by the cycle's lock
        assert "plants" in path.read_text()
    finally:
        lock.release()
    assert "replaced 1" in await asyncio.wait_for(edit, 10)
    assert path.read_text() == "## Active Tasks\n\n- Water the roses\n"
