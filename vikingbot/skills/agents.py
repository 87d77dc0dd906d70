"""Skills for an external agent (the ``acp`` loop): where it finds them in its working folder.

Claude Code looks for project skills in ``<cwd>/.claude/skills/<name>/SKILL.md``. When the
agent works in the turn's workspace, ``link_skills`` keeps one symbolic link there per skill
the workspace sees (its own and the user's, the workspace's winning), so the agent finds them
as its own; other agents read the paths the first prompt lists. Only links are made or
removed, and only links that point into a skills folder: a real folder or file there (the
user's own Claude skill) is never touched and wins over a skill of the same name.
"""

from __future__ import annotations

import os
from pathlib import Path

from loguru import logger

from vikingbot.skills.types import Catalog, Skill

LINKS = Path(".claude") / "skills"


def link_skills(workspace: Path, found: Catalog, user_skills: Path | None) -> Path | None:
    """Keep ``<workspace>/.claude/skills`` in step with ``found``; the folder, or ``None``
    when it cannot be kept (it is a link or a file the user made, or the disk refuses)."""
    top = workspace / LINKS
    ours = [os.path.realpath(workspace / "skills")]
    if user_skills is not None:
        ours.append(os.path.realpath(user_skills))
    wanted = {s.name: os.path.realpath(s.folder) for s in found.skills}
    try:
        if top.is_symlink() or (top.exists() and not top.is_dir()):
            return None
        top.mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(top):
            if not entry.is_symlink():
                continue
            target = os.readlink(entry.path)
            mine = any(target == root or target.startswith(root + os.sep) for root in ours)
            if mine and wanted.get(entry.name) != target:
                os.unlink(entry.path)  # a skill that went away or moved
        for name, target in wanted.items():
            path = top / name
            if not os.path.lexists(path):
                os.symlink(target, path, target_is_directory=True)
    except OSError as exc:
        logger.warning("skills: cannot keep the links in {}: {}", top, exc)
        return None
    return top


def shown_path(skill: Skill, linked: Path | None, cwd: Path) -> str:
    """Where an external agent reads a skill's SKILL.md: through the link when there is one,
    else the file itself (relative to ``cwd`` when inside it)."""
    if linked is not None and (linked / skill.name).is_symlink():
        path = linked / skill.name / "SKILL.md"
    else:
        path = skill.file
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return str(path)
