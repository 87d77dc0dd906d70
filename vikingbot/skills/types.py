"""What a skill is, as discovery found it, and what was wrong with the ones it skipped."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Source = Literal["workspace", "user"]


@dataclass(frozen=True, slots=True)
class Skill:
    """One usable skill: its name, its (capped) description, where its folder is."""

    name: str
    description: str
    folder: Path  # the folder as found in its skills folder (not resolved)
    source: Source
    fields: tuple[tuple[str, str], ...] = ()  # every front-matter key, as text (never config)

    @property
    def file(self) -> Path:
        return self.folder / "SKILL.md"


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """Why one skill folder was skipped or capped: where, and what to fix."""

    folder: Path
    source: Source
    message: str
    skipped: bool = True  # False: the skill still loads (capped), the problem is a warning

    def __str__(self) -> str:
        return f"{self.folder}: {self.message}"


@dataclass(frozen=True, slots=True)
class Catalog:
    """Every skill one workspace sees (workspace skills win over the user's), sorted by name,
    and the problems found on the way."""

    skills: tuple[Skill, ...] = ()
    problems: tuple[SkillProblem, ...] = ()
    shadowed: tuple[Skill, ...] = field(default=())  # user skills a workspace skill replaces

    def get(self, name: str) -> Skill | None:
        """The skill called ``name`` (case-insensitive), or ``None``."""
        wanted = name.casefold()
        return next((s for s in self.skills if s.name.casefold() == wanted), None)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.skills]
