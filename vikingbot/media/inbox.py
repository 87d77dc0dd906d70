"""The workspace's ``inbox/``: every file a person sent, kept under a dated name."""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

INBOX = "inbox"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str, ext: str) -> str:
    """``name`` as a plain file name (letters, digits, ``._-``), at most 80 characters,
    ending in ``.ext``; never empty, never hidden."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    stem = base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base
    stem = _UNSAFE.sub("-", stem).strip(".-")[:60] or "file"
    return f"{stem}.{_UNSAFE.sub('', ext)[:10] or 'bin'}"


def dated_name(name: str, ext: str, when: datetime) -> str:
    """``20261206-203012-photo.jpg``: the time it came, then its safe name."""
    return f"{when:%Y%m%d-%H%M%S}-{safe_name(name, ext)}"


def keep(workspace: Path, name: str, ext: str, data: bytes, when: datetime) -> Path:
    """Write ``data`` to ``workspace/inbox/<dated name>`` (never over another file);
    returns the path. Written in full before it gets its name."""
    folder = workspace / INBOX
    folder.mkdir(parents=True, exist_ok=True)
    want = dated_name(name, ext, when)
    stem, _, suffix = want.rpartition(".")
    for n in range(1000):
        path = folder / (want if n == 0 else f"{stem}-{n}.{suffix}")
        if path.exists():
            continue
        tmp = folder / f".{path.name}.part"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # fails if another message took the name meanwhile
        except FileExistsError:
            continue
        finally:
            tmp.unlink(missing_ok=True)
        return path
    raise OSError(f"{folder}: no free name for {want}")
