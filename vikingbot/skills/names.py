"""What a skill may be called: one folder name, never a path. Pure."""

from __future__ import annotations

import re

NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9])?")


def name_problem(name: str, key: str = "name") -> str | None:
    """Why ``name`` cannot be a skill's name (as the value of ``key:``), or ``None``."""
    if any(c in name for c in "/\\\0") or ".." in name:
        return f"{key}: {name[:80]!r} holds path characters; use letters, digits, '-', '_', '.'"
    if not NAME.fullmatch(name):
        return (
            f"{key}: {name[:80]!r} is not a skill name (1-64 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit)"
        )
    return None
