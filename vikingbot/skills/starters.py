"""The starter skills shipped in ``starters/``: copied into ``<home>/skills`` on first start.

Each starter is offered once: a folder that exists is never touched, and a starter the user
deleted does not come back (``.starters`` in the skills folder lists the ones offered, one name
a line). A starter added by a later version is offered on the next start.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from loguru import logger

from vikingbot.fsutil import atomic_write_text

RECORD = ".starters"


def starters_dir() -> Path:
    return Path(str(resources.files("vikingbot.skills").joinpath("starters")))


def starter_names() -> list[str]:
    top = starters_dir()
    return sorted(p.name for p in top.iterdir() if (p / "SKILL.md").is_file())


def install(user_skills: Path) -> list[str]:
    """Copy the starters not offered before into ``user_skills``; return the names copied."""
    user_skills.mkdir(parents=True, exist_ok=True)
    record = user_skills / RECORD
    try:
        offered = set(record.read_text(encoding="utf-8").split())
    except (FileNotFoundError, UnicodeDecodeError):
        offered = set()
    copied: list[str] = []
    names = starter_names()
    for name in names:
        if name in offered:
            continue
        dest = user_skills / name
        if not (dest.exists() or dest.is_symlink()) and _copy(starters_dir() / name, dest):
            copied.append(name)
    if not set(names) <= offered:
        atomic_write_text(record, "".join(f"{n}\n" for n in sorted(offered | set(names))))
    if copied:
        logger.info("skills: added the starter skills {} to {}", ", ".join(copied), user_skills)
    return copied


def _copy(source: Path, dest: Path) -> bool:
    """Copy one starter folder; files are created exclusively, so nothing is overwritten."""
    try:
        dest.mkdir()
    except FileExistsError:
        return False
    for path in sorted(source.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as out:
            out.write(path.read_bytes())
    return True
