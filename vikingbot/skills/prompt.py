"""What the model is told about skills: the listing in the system prompt, and a skill's text.

The system prompt lists each skill's name and description (``MAX_LISTED`` at most; the rest
are counted, never silently dropped); the body is loaded when needed, by the ``skill`` tool in
chats and built-in turns, or, for a heartbeat entry that names a skill, in the turn's prompt
from the start (``skill_text``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from vikingbot.skills.discover import SKILL_FILE, read_text
from vikingbot.skills.frontmatter import split
from vikingbot.skills.types import Catalog, Skill

MAX_LISTED = 100
MAX_BODY_CHARS = 32_000
MAX_FILES = 50
_FILES_DEPTH = 3

TOOL_INTRO = (
    "Skills are procedures your user keeps for you. When a request matches a skill's "
    "description, call the `skill` tool with its name before you start, and follow it."
)
PATH_INTRO = (
    "Skills are procedures your user keeps for you. When a request matches a skill's "
    "description, read its SKILL.md (path given) before you start, and follow it; files "
    "beside it are part of the skill."
)


def listing(catalog: Catalog, *, where: Callable[[Skill], str] | None = None) -> str | None:
    """The system prompt's ``## Skills`` section, or ``None`` with no skill.

    With ``where`` (for an external agent, which has no ``skill`` tool) each line also says
    where the skill's SKILL.md is, as ``where(skill)`` gives it."""
    if not catalog.skills:
        return None
    lines = ["## Skills", "", PATH_INTRO if where is not None else TOOL_INTRO, ""]
    for skill in catalog.skills[:MAX_LISTED]:
        line = f"- {skill.name}: {skill.description}"
        if where is not None:
            line += f" (SKILL.md: {where(skill)})"
        lines.append(line)
    rest = len(catalog.skills) - MAX_LISTED
    if rest > 0:
        how = "the skill tool loads any of them by name" if where is None else "see the folders"
        lines.append(f"- ... and {rest} more skills not listed here ({how})")
    return "\n".join(lines)


def body(skill: Skill) -> tuple[str | None, str | None]:
    """A skill's body (after its front matter) as it is on disk now, capped at
    ``MAX_BODY_CHARS``; or ``None`` and why it cannot be read."""
    text, _, problem = read_text(skill.file)
    if text is None:
        return None, problem
    found = split(text).body.strip()
    if len(found) > MAX_BODY_CHARS:
        found = found[:MAX_BODY_CHARS] + f"\n[... {SKILL_FILE} cut at {MAX_BODY_CHARS} characters]"
    return found, None


def other_files(skill: Skill) -> tuple[list[str], int]:
    """Files beside SKILL.md (relative paths, hidden ones and links out left aside), at most
    ``MAX_FILES``, and how many more there are."""
    found: list[str] = []
    more = 0
    top = str(skill.folder)
    for here, dirs, files in os.walk(top, followlinks=False):
        depth = here[len(top) :].count(os.sep)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < _FILES_DEPTH else []
        for name in sorted(files):
            if name.startswith(".") or (here == top and name == SKILL_FILE):
                continue
            if len(found) >= MAX_FILES:
                more += 1
                continue
            found.append(os.path.relpath(os.path.join(here, name), top).replace(os.sep, "/"))
    return found, more


def skill_text(skill: Skill) -> str:
    """A skill as a heartbeat turn's prompt carries it: name, body and the files beside it."""
    text, problem = body(skill)
    head = f"Skill {skill.name} ({skill.source} skill; follow it for this task):"
    if text is None:
        return f"{head}\n(its {SKILL_FILE} cannot be read now: {problem})"
    parts = [head, "", text]
    files, more = other_files(skill)
    if files:
        parts += ["", "Files beside it (read one with the skill tool: name and file):"]
        parts += [f"- {f}" for f in files]
        if more:
            parts.append(f"- ... and {more} more")
    return "\n".join(parts)
