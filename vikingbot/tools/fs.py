"""File tools: ``read_file``, ``write_file``, ``edit_file``, ``list_dir``, ``glob``, ``grep``.

Paths are relative to the turn's workspace and, with
``bot.tools.exec.restrict_to_workspace``, confined to it (see ``paths``).
Writes are atomic (temp file, fsync, rename). Output is capped so one call can
never flood the model's context.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from vikingbot.agentio import open_regular
from vikingbot.errors import ToolError
from vikingbot.fsutil import atomic_write_text, locked_edit
from vikingbot.tools import pdf, reading
from vikingbot.tools.base import Tool, ToolContext
from vikingbot.tools.paths import is_inside, resolve_in, shown

MAX_READ_CHARS = reading.MAX_READ_CHARS
MAX_EDIT_BYTES = 8 * 1024 * 1024  # edit_file holds the file in memory; larger files are refused
MAX_ENTRIES = 500
MAX_GREP_FILE_BYTES = 2_000_000
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".ruff_cache"}


def _path(ctx: ToolContext, raw: Any) -> Path:
    restrict = ctx.config.bot.tools.exec.restrict_to_workspace
    return resolve_in(ctx.workspace, raw, restrict=restrict)


def read_text(path: Path, label: str) -> str:
    """A whole text file for an edit (regular files only, at most ``MAX_EDIT_BYTES``)."""
    return reading.read_text(path, label, MAX_EDIT_BYTES)


def write_atomic(path: Path, text: str) -> None:
    """UTF-8, no newline translation, atomically (temp file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


HEARTBEAT_FILE = "HEARTBEAT.md"


def _check_size(content: str, label: str) -> str:
    """Model-written content is capped like what the tools read (``MAX_EDIT_BYTES``)."""
    size = len(content.encode("utf-8", errors="surrogatepass"))
    if size > MAX_EDIT_BYTES:
        raise ToolError(f"{label}: {size} bytes is over the {MAX_EDIT_BYTES}-byte limit")
    return content


async def _write_heartbeat(ctx: ToolContext, path: Path, fn: Callable[[str], str]) -> None:
    """HEARTBEAT.md goes through the heartbeat's own lock, so a cycle's rewrite and the
    agent's edit never overwrite each other."""
    await ctx.io.run(locked_edit, path, fn, error=ToolError)


class ReadFileTool(Tool):
    name = "read_file"
    description = (
        "Read a UTF-8 text file from the workspace (a PDF: its text). Optional 1-based line "
        "`offset` and line `limit` read a part of a long file."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "offset": {"type": "integer", "description": "First line to read (1-based)."},
            "limit": {"type": "integer", "description": "Number of lines to read."},
        },
        "required": ["path"],
    }
    read_only = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = _path(ctx, args["path"])
        offset = max(1, int(args.get("offset") or 1))
        limit = max(1, int(args["limit"])) if args.get("limit") else None
        if path.suffix.lower() == ".pdf":  # a PDF's text (inbox/ holds those people send)
            whole = await ctx.io.run(pdf.pdf_text, path, args["path"])
            text = pdf.lines_of(whole, args["path"], offset, limit, reading.MAX_READ_CHARS)
        else:
            text = await ctx.io.run(reading.read_lines, path, args["path"], offset, limit)
        return text if text else "(empty file)"


class WriteFileTool(Tool):
    name = "write_file"
    description = "Create or overwrite a text file in the workspace (parent folders are created)."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "content": {"type": "string", "description": "The complete new content."},
        },
        "required": ["path", "content"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = _path(ctx, args["path"])
        if path.is_dir():
            raise ToolError(f"{args['path']} is a directory")
        content = str(args["content"])
        _check_size(content, args["path"])
        if path.name == HEARTBEAT_FILE:
            await _write_heartbeat(ctx, path, lambda _old: content)
        else:
            await ctx.io.run(write_atomic, path, content)
        return f"wrote {len(content.encode())} bytes to {shown(ctx.workspace, path)}"


class EditFileTool(Tool):
    name = "edit_file"
    description = (
        "Replace `old_text` with `new_text` in a workspace file. `old_text` must occur exactly "
        "once unless `replace_all` is true."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "old_text": {"type": "string", "description": "Exact text to find."},
            "new_text": {"type": "string", "description": "Replacement text."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
        },
        "required": ["path", "old_text", "new_text"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = _path(ctx, args["path"])
        old, new = str(args["old_text"]), str(args["new_text"])
        if not old:
            raise ToolError("edit_file: old_text may not be empty (use write_file)")
        counted: list[int] = []

        def replace(text: str) -> str:
            count = text.count(old)
            if count == 0:
                raise ToolError(f"edit_file: old_text not found in {args['path']}")
            if count > 1 and not args.get("replace_all"):
                raise ToolError(
                    f"edit_file: old_text occurs {count} times in {args['path']}; give more "
                    "context or set replace_all"
                )
            counted.append(count)
            return _check_size(text.replace(old, new), args["path"])

        if path.name == HEARTBEAT_FILE:
            await ctx.io.run(read_text, path, args["path"])  # a clear error first
            await _write_heartbeat(ctx, path, replace)
        else:
            text = await ctx.io.run(read_text, path, args["path"])
            await ctx.io.run(write_atomic, path, replace(text))
        return f"replaced {counted[-1]} occurrence(s) in {shown(ctx.workspace, path)}"


class ListDirTool(Tool):
    name = "list_dir"
    description = "List a workspace folder: sub-folders end with '/', files show their size."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Folder (default: '.')."}},
    }
    read_only = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        raw = args.get("path") or "."
        path = _path(ctx, raw)
        if not path.is_dir():
            raise ToolError(f"{raw}: no such folder")
        return await ctx.io.run(_list, path)


def _list(path: Path) -> str:
    entries = sorted(path.iterdir(), key=lambda p: p.name)
    lines = []
    for entry in entries[:MAX_ENTRIES]:
        if entry.is_dir():
            lines.append(f"{entry.name}/")
        else:
            try:
                size = entry.stat().st_size
            except OSError:
                size = -1
            lines.append(f"{entry.name}  ({size} bytes)" if size >= 0 else entry.name)
    if len(entries) > MAX_ENTRIES:
        lines.append(f"[... {len(entries) - MAX_ENTRIES} more entries]")
    return "\n".join(lines) or "(empty folder)"


class GlobTool(Tool):
    name = "glob"
    description = "Find workspace files by pattern, e.g. '**/*.md' (relative to `path`)."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern; ** matches folders."},
            "path": {"type": "string", "description": "Folder to search (default: '.')."},
        },
        "required": ["pattern"],
    }
    read_only = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        pattern = str(args["pattern"])
        if pattern.startswith("/") or ".." in Path(pattern).parts:
            raise ToolError("glob: the pattern must be relative and may not contain '..'")
        base = _path(ctx, args.get("path") or ".")
        if not base.is_dir():
            raise ToolError(f"{args.get('path')}: no such folder")
        restrict = ctx.config.bot.tools.exec.restrict_to_workspace
        return await ctx.io.run(_glob, ctx.workspace, base, pattern, restrict)


def _glob(workspace: Path, base: Path, pattern: str, restrict: bool) -> str:
    found: list[str] = []
    more = 0
    for p in sorted(base.glob(pattern)):
        if restrict and not is_inside(workspace, p.resolve()):
            continue
        if any(part in SKIP_DIRS for part in p.relative_to(base).parts):
            continue
        if len(found) >= MAX_ENTRIES:
            more += 1
            continue
        found.append(shown(workspace, p) + ("/" if p.is_dir() else ""))
    if more:
        found.append(f"[... {more} more matches]")
    return "\n".join(found) or "(no matches)"


class GrepTool(Tool):
    name = "grep"
    description = (
        "Search workspace text files for a regular expression; prints path:line: text. "
        "`include` filters file names (e.g. '*.md')."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Python regular expression."},
            "path": {"type": "string", "description": "File or folder (default: '.')."},
            "include": {"type": "string", "description": "File name glob, e.g. '*.py'."},
            "ignore_case": {"type": "boolean"},
            "max_results": {"type": "integer", "description": "Default 100."},
        },
        "required": ["pattern"],
    }
    read_only = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            rx = re.compile(str(args["pattern"]), re.IGNORECASE if args.get("ignore_case") else 0)
        except re.error as exc:
            raise ToolError(f"grep: bad regular expression: {exc}") from exc
        base = _path(ctx, args.get("path") or ".")
        if not base.exists():
            raise ToolError(f"{args.get('path')}: no such file or folder")
        limit = max(1, min(int(args.get("max_results") or 100), 1000))
        restrict = ctx.config.bot.tools.exec.restrict_to_workspace
        return await ctx.io.run(
            _grep, ctx.workspace, base, rx, args.get("include"), limit, restrict
        )


def _files(base: Path) -> list[Path]:
    if base.is_file():
        return [base]
    out: list[Path] = []
    for root, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        out.extend(Path(root, f) for f in sorted(files))
    return out


def _grep(
    workspace: Path, base: Path, rx: re.Pattern[str], include: Any, limit: int, restrict: bool
) -> str:
    hits: list[str] = []
    for f in _files(base):
        if include and not fnmatch.fnmatch(f.name, str(include)):
            continue
        try:
            if restrict and not is_inside(workspace, f.resolve()):
                continue
            st = f.stat()
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_GREP_FILE_BYTES:
                continue  # a pipe would block the search; a huge file would bloat it
            fd = open_regular(f, str(f))
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(MAX_GREP_FILE_BYTES)
        except (OSError, ToolError):
            continue
        if b"\x00" in data[:8192]:
            continue
        text = data.decode("utf-8", errors="replace")
        for no, line in enumerate(text.splitlines(), 1):
            if rx.search(line):
                if len(hits) >= limit:
                    hits.append(f"[... stopped after {limit} matches]")
                    return "\n".join(hits)
                hits.append(f"{shown(workspace, f)}:{no}: {line[:300]}")
    return "\n".join(hits) or "(no matches)"
