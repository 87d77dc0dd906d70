"""Adding and removing skills for ``vikingbot skills add`` / ``remove``.

``add`` copies a skill folder into a skills folder only when it checks out as a skill
(the same checks discovery makes) and nothing of that name is there yet; the copy is made
beside the destination and renamed into place, so a half-copied skill is never seen.
Symbolic links, pipes and devices in the source are refused, and so is a folder of more
than ``MAX_FILES`` files or ``MAX_BYTES`` bytes: a skill is a few text files.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from vikingbot.errors import VikingbotError
from vikingbot.skills.discover import SKILL_FILE, check, read_text
from vikingbot.skills.frontmatter import split
from vikingbot.skills.names import name_problem
from vikingbot.skills.types import Skill, SkillProblem, Source

MAX_FILES = 1000
MAX_BYTES = 50 * 1024 * 1024


class SkillError(VikingbotError):
    """A skill could not be added or removed; the message says why and what to do."""


def add(source: Path, skills_dir: Path, where: Source) -> tuple[Skill, SkillProblem | None]:
    """Copy the skill folder ``source`` (or the folder of a ``SKILL.md`` given) into
    ``skills_dir``; the skill and its warning (a capped description) if any."""
    source = source.expanduser()
    if source.name == SKILL_FILE and source.is_file():
        source = source.parent
    if not (source / SKILL_FILE).is_file():
        raise SkillError(f"{source} is not a skill folder: it has no {SKILL_FILE}")
    skill, problem = check(source, where, name=_front_name(source))
    if skill is None:
        raise SkillError(f"{source}: {problem.message if problem else 'not a skill'}")
    dest = skills_dir / skill.name
    if dest.exists() or dest.is_symlink():
        raise SkillError(f"{dest} exists already; remove it first (vikingbot skills remove)")
    files = _files(source)
    skills_dir.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".adding-{skill.name}-", dir=skills_dir))
    try:
        for rel in files:
            target = temp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / rel, target, follow_symlinks=False)
        os.rename(temp, dest)
    except OSError as exc:
        shutil.rmtree(temp, ignore_errors=True)
        raise SkillError(f"could not copy {source} to {dest}: {exc}") from exc
    added, problem = check(dest, where)
    assert added is not None  # checked above; the copy is the same text
    return added, problem


def _front_name(folder: Path) -> str | None:
    """The name the skill's front matter gives (the copy is made under it)."""
    text, _, _ = read_text(folder / SKILL_FILE)
    return split(text).fields.get("name", "").strip() or None if text else None


def _files(source: Path) -> list[Path]:
    """Every file under ``source`` (relative), refusing links, pipes, devices and bulk."""
    found: list[Path] = []
    total = 0
    for here, dirs, names in os.walk(source, followlinks=False):
        for name in [*dirs, *names]:
            path = Path(here) / name
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                raise SkillError(f"{path} is a symbolic link; copy what it points to instead")
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                raise SkillError(f"{path} is not a regular file (a pipe, socket or device)")
            found.append(path.relative_to(source))
            total += st.st_size
            if len(found) > MAX_FILES or total > MAX_BYTES:
                raise SkillError(
                    f"{source} holds more than {MAX_FILES} files or {MAX_BYTES} bytes; "
                    "a skill is a few text files"
                )
    return found


def remove(name: str, skills_dir: Path) -> Path:
    """Delete the skill folder ``skills_dir/name`` (a link: only the link); its path."""
    why = name_problem(name)
    if why:
        raise SkillError(why)
    folder = skills_dir / name
    if folder.is_symlink():
        folder.unlink()
        return folder
    if not folder.is_dir():
        raise SkillError(f"there is no skill folder {folder}")
    shutil.rmtree(folder)
    return folder
