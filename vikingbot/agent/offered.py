"""The prompt says only what is true: no word of a tool the turn is not offered.

An unattended turn (heartbeat, cron) is offered only the tools approval lets run with
nobody present. The preamble's words about files and commands, and the list items of
``TOOLS.md`` (the user's notes on tools; the shipped one lists ``exec``, ``write_file``,
``edit_file``), must then not describe the others. :func:`tools_note` drops each list
item that names (in backticks) a known tool the turn is not offered, with the lines that
continue it; everything else of the file stays (the heartbeat protocol, the user's own
notes). Pure and total: any text gives a text, in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Collection

_NAMED = re.compile(r"`([A-Za-z0-9_.-]{1,64})`")
FILE_READ = frozenset({"read_file", "list_dir", "glob", "grep"})
FILE_WRITE = frozenset({"write_file", "edit_file"})
COMMANDS = frozenset({"exec"})


def tools_note(text: str, known: Collection[str], offered: Collection[str]) -> str:
    """``TOOLS.md`` without the list items about tools in ``known`` but not ``offered``."""
    absent = set(known) - set(offered)
    if not absent:
        return text
    out: list[str] = []
    dropping = False
    for line in text.splitlines():
        stripped = line.lstrip()
        item = stripped.startswith(("- ", "* ")) or (
            stripped[:1].isdigit() and ". " in stripped[:4]
        )
        if item:
            dropping = any(name in absent for name in _NAMED.findall(line))
        elif not stripped or not line[:1].isspace():
            dropping = False  # a blank line or a line at the margin ends the item
        if not dropping:
            out.append(line)
    return "\n".join(out).strip()


def workspace_line(workspace: str, offered: Collection[str]) -> str:
    """The preamble's sentence about the workspace, naming only the tools offered."""
    tools = set(offered)
    kinds = []
    if tools & (FILE_READ | FILE_WRITE):
        kinds.append("file tools")
    if tools & COMMANDS:
        kinds.append("commands")
    if not kinds:
        return f"Your workspace is {workspace}."
    return f"Your workspace is {workspace}; {' and '.join(kinds)} work inside it."


def can_write_files(offered: Collection[str]) -> bool:
    return bool(FILE_WRITE & set(offered))
