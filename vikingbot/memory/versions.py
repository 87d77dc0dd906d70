"""The memory files and their history: every change a snapshot the user can read and undo.

A workspace's memory is two Markdown files, ``memory/MEMORY.md`` (facts) and
``memory/USER.md`` (who the user is). Every change vikingbot makes to them (the
idle consolidation pass, the ``memory`` tool's ``remember`` / ``forget``, an undo)
goes through ``change``: each file is rewritten with ``fsutil.locked_edit`` (the
compare-and-swap editor, so concurrent chats and a person's editor never lose an
edit) and then one snapshot file is written to ``memory/.history/``::

    memory/.history/20261206T204512123456-3f9a.json
    {"id": "20261206T204512123456-3f9a", "at": "...", "reason": "remember (cli:default:local)",
     "files": {"MEMORY.md": {"before": "...", "after": "..."}}}

File names sort by time, so ``log`` is a directory listing; ``show`` renders the
diff from before and after; ``undo`` puts "before" back when the file still
holds that change's "after" (otherwise it refuses and names the later change to
undo first), and is itself a new snapshot. Edits a person makes by hand are not
snapshots: they are simply what the next change finds as "before".
"""

from __future__ import annotations

import difflib
import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vikingbot.errors import VikingbotError
from vikingbot.fsutil import atomic_write_text, locked_edit

FILES = ("MEMORY.md", "USER.md")
HISTORY = ".history"


class MemoryRefused(VikingbotError):
    """A memory change or undo was refused (the message says why)."""


@dataclass(frozen=True)
class Version:
    """One recorded change of the memory files."""

    id: str
    at: datetime
    reason: str
    files: dict[str, tuple[str, str]]  # name -> (before, after)

    def diff(self) -> str:
        """The change as a unified diff, file by file."""
        out: list[str] = []
        for name, (before, after) in self.files.items():
            out.extend(
                difflib.unified_diff(
                    before.splitlines(keepends=True),
                    after.splitlines(keepends=True),
                    f"a/memory/{name}",
                    f"b/memory/{name}",
                )
            )
        return "".join(line if line.endswith("\n") else line + "\n" for line in out)

    def stat(self) -> str:
        """``+3 -1`` over all files."""
        plus = minus = 0
        for line in self.diff().splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                plus += 1
            elif line.startswith("-") and not line.startswith("---"):
                minus += 1
        return f"+{plus} -{minus}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "reason": self.reason,
            "files": {n: {"before": b, "after": a} for n, (b, a) in self.files.items()},
        }


def memory_dir(workspace: Path) -> Path:
    return workspace / "memory"


def read(workspace: Path, name: str) -> str:
    """A memory file's text (``""`` when missing or unreadable as UTF-8)."""
    try:
        return (memory_dir(workspace) / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def change(
    workspace: Path,
    edits: dict[str, Callable[[str], str]],
    reason: str,
    *,
    now: datetime | None = None,
) -> Version | None:
    """Apply ``edits`` (file name -> new text from current text) and record a snapshot.

    Each edit runs under the file's lock and again if the file changed meanwhile;
    an edit may raise ``MemoryRefused`` to refuse. Returns the snapshot, or ``None``
    when nothing changed.
    """
    folder = memory_dir(workspace)
    folder.mkdir(parents=True, exist_ok=True)
    changed: dict[str, tuple[str, str]] = {}
    for name, fn in edits.items():
        if name not in FILES:
            raise MemoryRefused(f"memory has no file {name!r} (files: {', '.join(FILES)})")
        seen: dict[str, str] = {}

        def edit(text: str, fn: Callable[[str], str] = fn, seen: dict[str, str] = seen) -> str:
            seen["before"] = text
            seen["after"] = fn(text)
            return seen["after"]

        locked_edit(folder / name, edit, error=MemoryRefused)
        if seen and seen["before"] != seen["after"]:
            changed[name] = (seen["before"], seen["after"])
    if not changed:
        return None
    when = now or datetime.now(UTC)
    version = Version(f"{when:%Y%m%dT%H%M%S%f}-{secrets.token_hex(2)}", when, reason, changed)
    atomic_write_text(
        folder / HISTORY / f"{version.id}.json",
        json.dumps(version.to_dict(), ensure_ascii=False, indent=1) + "\n",
    )
    return version


def log(workspace: Path) -> list[Version]:
    """Every recorded change, newest first (unreadable snapshot files are skipped)."""
    folder = memory_dir(workspace) / HISTORY
    try:
        names = sorted((n for n in os.listdir(folder) if n.endswith(".json")), reverse=True)
    except FileNotFoundError:
        return []
    found = [_load(folder / n) for n in names]
    return [v for v in found if v is not None]


def get(workspace: Path, ident: str) -> Version:
    """The change ``ident`` (a whole id or a unique start of one)."""
    matches = [v for v in log(workspace) if v.id.startswith(ident)] if ident else []
    if len(matches) != 1:
        what = "no" if not matches else "more than one"
        raise MemoryRefused(
            f"{what} memory change matches {ident!r} in {memory_dir(workspace) / HISTORY}; "
            "see `vikingbot memory log`"
        )
    return matches[0]


def undo(workspace: Path, ident: str, *, now: datetime | None = None) -> Version:
    """Put back what change ``ident`` replaced, as a new change. Refused when a file
    changed since (undo the later change first, or edit the file by hand)."""
    target = get(workspace, ident)
    later = [v for v in log(workspace) if v.id > target.id]
    edits: dict[str, Callable[[str], str]] = {}
    for name, (before, after) in target.files.items():

        def put_back(text: str, before: str = before, after: str = after, name: str = name) -> str:
            if text != after:
                newer = next((v.id for v in reversed(later) if name in v.files), None)
                hint = f"undo {newer} first" if newer else "it was edited by hand since"
                raise MemoryRefused(f"memory/{name} changed after {target.id}: {hint}")
            return before

        edits[name] = put_back
    done = change(workspace, edits, f"undo {target.id}", now=now)
    if done is None:
        raise MemoryRefused(f"undoing {target.id} changed nothing")
    return done


def _load(path: Path) -> Version | None:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
        files = {str(n): (str(f["before"]), str(f["after"])) for n, f in dict(obj["files"]).items()}
        return Version(str(obj["id"]), datetime.fromisoformat(obj["at"]), str(obj["reason"]), files)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
