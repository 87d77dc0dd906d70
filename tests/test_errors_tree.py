"""The error tree drawn in vikingbot/errors.py is the tree in the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import vikingbot
from vikingbot import errors

ROOT = Path(vikingbot.__file__).parent


def _classes_in_code() -> dict[str, str]:
    """Every class under vikingbot/ that derives from VikingbotError: name -> parent."""
    bases: dict[str, str] = {}
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.bases:
                base = node.bases[0]
                name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                bases[node.name] = name
    found: dict[str, str] = {}
    grew = True
    while grew:
        grew = False
        for name, base in bases.items():
            if name not in found and (base == "VikingbotError" or base in found):
                found[name] = base
                grew = True
    return found


def _classes_drawn() -> dict[str, str]:
    """The docstring's drawing: name -> parent, from the indentation of each line."""
    drawn: dict[str, str] = {}
    parents: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        m = re.match(r"^([\s│]*)[├└]── ([A-Z]\w+)(?:\s|$)", line)
        if m is None:
            if line.strip().startswith("VikingbotError "):
                parents = [(-1, "VikingbotError")]
            continue
        depth = len(m.group(1))
        while parents and parents[-1][0] >= depth:
            parents.pop()
        drawn[m.group(2)] = parents[-1][1] if parents else "VikingbotError"
        parents.append((depth, m.group(2)))
    return drawn


def test_the_drawn_tree_is_the_code() -> None:
    assert _classes_drawn() == _classes_in_code()


def test_every_drawn_class_of_errors_py_exists_there() -> None:
    here = {n for n, v in vars(errors).items() if isinstance(v, type)}
    in_module = {n for n in _classes_drawn() if "(" not in _line_of(n)}
    assert in_module <= here


def _line_of(name: str) -> str:
    return next(line for line in (errors.__doc__ or "").splitlines() if f" {name} " in line)
