"""An older commit's ``vikingbot`` package, unpacked for a bench to run beside this one."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def unpack(rev: str, into: Path) -> Path:
    """``rev``'s ``vikingbot`` package (and its workspace template, which a gateway's
    first start copies) under ``into``: put ``into`` first on ``PYTHONPATH``, and run
    the child outside the repository (``-m`` puts the working folder first)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "vikingbot", "workspace_template"],
        capture_output=True,
        check=True,
    ).stdout
    into.mkdir(parents=True, exist_ok=True)
    tar = into / "base.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into
