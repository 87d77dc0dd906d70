"""What the gateway writes is for its user only: files 0600, folders 0700.

:func:`keep_private` sets the process umask to ``077`` (every file and folder
created afterwards: the state database and its WAL, logs, sessions, MCP logs,
pins) and tightens what an older version left readable in the data folder; ``fsutil.new_file_mode``
gives a file made by an atomic edit the same mode
(``state.db*``, ``logs/``). Never raises: a path it cannot change is skipped.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

UMASK = 0o077
MAX_TIGHTENED = 10_000  # files looked at in logs/ (a bounded walk)


def _tighten(path: Path) -> None:
    with contextlib.suppress(OSError):
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            return
        want = 0o700 if stat.S_ISDIR(mode) else 0o600
        if stat.S_IMODE(mode) & 0o077:
            path.chmod(stat.S_IMODE(mode) & want)


def keep_private(data_dir: Path) -> None:
    """Umask 077 for this process; the data folder, its state database and logs tightened."""
    os.umask(UMASK)
    _tighten(data_dir)
    for path in sorted(data_dir.glob("state.db*"))[:10]:
        _tighten(path)
    logs = data_dir / "logs"
    _tighten(logs)
    with contextlib.suppress(OSError):
        for n, path in enumerate(logs.iterdir()):
            if n >= MAX_TIGHTENED:
                break
            _tighten(path)
