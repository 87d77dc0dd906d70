"""The ``skill`` tool: a skill's instructions, loaded when the model needs them. Read-only.

``{"name": "weekly-report"}`` returns the skill's body and lists the files beside it;
``{"name": ..., "file": "reference.md"}`` returns one of those files (inside the skill's
folder only, a regular file, UTF-8, capped like ``read_file``). The skills are the turn's
workspace's and the user's (``ToolContext.user_skills``), as the system prompt lists them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from vikingbot.errors import ToolError
from vikingbot.skills.discover import catalog
from vikingbot.skills.prompt import other_files, skill_text
from vikingbot.skills.types import Catalog, Skill
from vikingbot.tools import reading
from vikingbot.tools.base import Tool, ToolContext

MAX_NAMES = 200


class SkillTool(Tool):
    name = "skill"
    description = (
        "Load a skill (a procedure your user keeps for you, listed under Skills in the system "
        "prompt): returns its instructions and the files beside it. With `file`, returns one "
        "of those files."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The skill's name, as listed."},
            "file": {
                "type": "string",
                "description": "A file of the skill, relative to its folder (optional).",
            },
        },
        "required": ["name"],
    }
    read_only = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        return await ctx.io.run(self._run, args, ctx)

    def _run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        found = catalog(workspace=ctx.workspace, user=ctx.user_skills)
        skill = found.get(str(args["name"]).strip())
        if skill is None:
            raise ToolError(_unknown(str(args["name"]), found))
        if args.get("file"):
            return _file(skill, str(args["file"]))
        return skill_text(skill)


def _unknown(name: str, found: Catalog) -> str:
    if not found.skills:
        return f"there is no skill {name[:80]!r}: no skills are installed"
    names = found.names
    shown = ", ".join(names[:MAX_NAMES])
    more = f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else ""
    return f"there is no skill {name[:80]!r}; skills: {shown}{more}"


def _file(skill: Skill, raw: str) -> str:
    if "\0" in raw or os.path.isabs(raw):
        raise ToolError(f"file must be a path inside the skill's folder, got {raw[:100]!r}")
    top = os.path.realpath(skill.folder)
    path = os.path.realpath(os.path.join(skill.folder, raw))
    if not path.startswith(top.rstrip(os.sep) + os.sep):
        raise ToolError(f"{raw[:100]!r} is not inside the skill {skill.name}")
    try:
        return reading.read_lines(Path(path), raw[:100], 1, None)
    except ToolError as exc:
        files, _ = other_files(skill)
        raise ToolError(f"{exc} (files of {skill.name}: {', '.join(files) or 'none'})") from exc
