"""The size of each session's last request, by part, read back from the session files.

A turn of the built-in loop keeps its last request's size in characters in its
reply's metadata (``{"request": {"system": ..., "memory": ..., "summary": ...,
"recent": ..., "tools": ...}}``). ``last_requests`` reads the tail of the most
recently changed session files (never a whole long history) for ``vikingbot status``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

PARTS = ("system", "memory", "summary", "recent", "tools")
TAIL_BYTES = 256 * 1024
KEY = b'"request": {'


def last_request(path: Path) -> dict[str, int] | None:
    """The newest request breakdown in the file's tail, else ``None``. Never raises."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read()
    except OSError:
        return None
    for raw in reversed(tail.split(b"\n")):
        if KEY not in raw:
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        found = obj.get("metadata", {}).get("request") if isinstance(obj, dict) else None
        if isinstance(found, dict):
            return {p: _int(found.get(p)) for p in PARTS}
    return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def last_requests(sessions_dir: Path, limit: int = 5) -> list[dict[str, Any]]:
    """``{"session": file stem, **parts, "total": n}`` for the ``limit`` newest sessions."""
    try:
        entries = [e for e in os.scandir(sessions_dir) if e.name.endswith(".jsonl")]
    except OSError:
        return []
    entries.sort(key=lambda e: _mtime(e), reverse=True)
    rows: list[dict[str, Any]] = []
    for e in entries[:limit]:
        found = last_request(Path(e.path))
        if found is not None:
            key = _session_key(Path(e.path)) or e.name.removesuffix(".jsonl")
            rows.append({"session": key, **found, "total": sum(found.values())})
    return rows


def _mtime(e: os.DirEntry[str]) -> int:
    try:
        return e.stat().st_mtime_ns
    except OSError:
        return 0


def _session_key(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            obj = json.loads(fh.readline())
        return str(obj["key"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
