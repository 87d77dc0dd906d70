"""The ``file`` checker: files matching a path or glob, and whether they changed.

Option ``path``: an absolute path, a ``~`` path or a glob (``**`` recursive);
a directory means every file below it; ``{scope}`` is replaced by the scope.
There is work when at least one file matches. The signature covers every
match's path, size and modification time (and content, for small files), so
the heartbeat sees a new signature whenever a file is added, removed or edited.
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from vikingbot.errors import CheckerError
from vikingbot.heartbeat.checkers.base import Checker, CheckResult, signature_of, substitute_scope

CONTENT_HASH_MAX_BYTES = 64 * 1024
MAX_FILES = 10_000
_LISTED = 50


class FileChecker(Checker):
    kind = "file"
    options = frozenset({"path"})

    def validate(self) -> None:
        super().validate()
        raw = self.opt_str("path", required=True)
        if not Path(raw).expanduser().is_absolute():
            raise CheckerError(
                f"{self.where}.path: {raw!r} is relative; write an absolute path or one "
                "starting with ~ (the gateway's working directory is not a stable base)"
            )

    async def check(self, scope: str | None) -> CheckResult:
        pattern = substitute_scope(self.opt_str("path"), scope, where=f"{self.where}.path")
        pattern = str(Path(pattern).expanduser())
        return await asyncio.to_thread(self._scan, pattern)

    def _scan(self, pattern: str) -> CheckResult:
        files = _matching_files(pattern)
        if len(files) > MAX_FILES:
            raise CheckerError(
                f"{self.where}.path: {pattern!r} matches {len(files)} files "
                f"(at most {MAX_FILES}); narrow the pattern"
            )
        rows: list[tuple[str, int, int, str]] = []
        for path in files:
            try:
                st = path.stat()
                digest = _content_hash(path) if st.st_size <= CONTENT_HASH_MAX_BYTES else ""
            except OSError:
                continue  # vanished or unreadable between listing and stat
            rows.append((str(path), st.st_mtime_ns, st.st_size, digest))
        rows.sort()
        signature = signature_of(*("\0".join(map(str, row)) for row in rows))
        if not rows:
            return CheckResult(has_work=False, signature=signature)
        return CheckResult(has_work=True, signature=signature, context=_describe(pattern, rows))


def _matching_files(pattern: str) -> list[Path]:
    target = Path(pattern)
    found: Iterable[Path]
    if glob.has_magic(pattern):
        found = (Path(p) for p in glob.iglob(pattern, recursive=True))
    elif target.is_dir():
        found = target.rglob("*")
    else:
        found = [target]
    return [p for p in found if p.is_file()]


def _content_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _describe(pattern: str, rows: list[tuple[str, int, int, str]]) -> str:
    newest = sorted(rows, key=lambda r: r[1], reverse=True)
    lines = [f"{len(rows)} file(s) match {pattern} (newest first):"]
    for path, mtime_ns, size, _ in newest[:_LISTED]:
        when = datetime.fromtimestamp(mtime_ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        lines.append(f"- {path} ({size} bytes, modified {when})")
    if len(rows) > _LISTED:
        lines.append(f"- ... and {len(rows) - _LISTED} more")
    return "\n".join(lines)
