"""A small tmpfs for tests of a full or read-only home (needs root or CAP_SYS_ADMIN)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def mount_problem(probe: Path) -> str | None:
    """Why a tmpfs cannot be mounted here (``None``: it can)."""
    probe.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return f"cannot mount a tmpfs here ({done.stderr.strip() or 'mount failed'})"
    subprocess.run(["umount", str(probe)], check=False)
    return None


@contextmanager
def small_disk(path: Path, megabytes: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)], check=True
    )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def read_only(path: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)


def fill(path: Path) -> None:
    """Write zeros until the disk is full."""
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={path / 'filler'}", "bs=1M"], capture_output=True, check=False
    )
