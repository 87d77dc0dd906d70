"""File tools read only regular files, in bounded memory, without blocking the event loop."""

from __future__ import annotations

import asyncio
import os
import tracemalloc
from pathlib import Path

import pytest

from vikingbot.agent.context import read_context_files
from vikingbot.errors import ToolError
from vikingbot.tools.base import ToolContext
from vikingbot.tools.fs import MAX_EDIT_BYTES, EditFileTool, GrepTool, ReadFileTool, WriteFileTool

GIB = 1024**3

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")


async def test_read_file_on_a_named_pipe_is_refused_and_the_loop_keeps_running(
    workspace: Path, ctx: ToolContext
) -> None:
    os.mkfifo(workspace / "pipe")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    with pytest.raises(ToolError, match="not a regular file"):
        await asyncio.wait_for(ReadFileTool().run({"path": "pipe"}, ctx), 10)
    task.cancel()
    assert ticks > 0  # the loop ran while the tool worked


async def test_grep_skips_a_named_pipe_and_finds_the_rest(
    workspace: Path, ctx: ToolContext
) -> None:
    os.mkfifo(workspace / "a-pipe")
    (workspace / "notes.md").write_text("Ragnar was here\n")
    out = await asyncio.wait_for(GrepTool().run({"pattern": "Ragnar"}, ctx), 10)
    assert out == "notes.md:1: Ragnar was here"


async def test_edit_file_on_a_named_pipe_is_refused(workspace: Path, ctx: ToolContext) -> None:
    os.mkfifo(workspace / "pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        await asyncio.wait_for(
            EditFileTool().run({"path": "pipe", "old_text": "a", "new_text": "b"}, ctx), 10
        )


def test_a_context_file_that_is_a_pipe_is_skipped(workspace: Path) -> None:
    os.mkfifo(workspace / "SOUL.md")
    (workspace / "USER.md").write_text("Call me Astrid.\n")
    assert read_context_files(workspace) == [("USER.md", "Call me Astrid.")]


def _huge(path: Path) -> None:
    """1 GiB: some text lines, then a hole (sparse, so the disk is not filled)."""
    with path.open("wb") as fh:
        fh.write(b"".join(b"line %d\n" % n for n in range(1, 2001)))
        fh.truncate(GIB)


async def test_reading_a_1_gib_file_stays_in_bounded_memory(
    workspace: Path, ctx: ToolContext
) -> None:
    _huge(workspace / "big.log")
    tracemalloc.start()
    try:
        part = await ReadFileTool().run({"path": "big.log", "offset": 10, "limit": 3}, ctx)
        whole = await ReadFileTool().run({"path": "big.log"}, ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert part.startswith("line 10\nline 11\nline 12\n")
    assert "read on with offset=13" in part
    assert whole.startswith("line 1\n") and "truncated at 100000 characters" in whole
    assert peak < 32 * 1024 * 1024


async def test_editing_a_huge_file_is_refused_before_reading_it(
    workspace: Path, ctx: ToolContext
) -> None:
    _huge(workspace / "big.log")
    with pytest.raises(ToolError, match=r"over the .*-byte limit"):
        await EditFileTool().run({"path": "big.log", "old_text": "line 1", "new_text": "x"}, ctx)


async def test_model_written_content_is_capped(workspace: Path, ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match=r"over the .*-byte limit"):
        await WriteFileTool().run({"path": "out.txt", "content": "x" * (MAX_EDIT_BYTES + 1)}, ctx)
    assert not (workspace / "out.txt").exists()
    (workspace / "small.txt").write_text("ab")
    with pytest.raises(ToolError, match=r"over the .*-byte limit"):
        await EditFileTool().run(
            {"path": "small.txt", "old_text": "a", "new_text": "y" * MAX_EDIT_BYTES}, ctx
        )
    assert (workspace / "small.txt").read_text() == "ab"
