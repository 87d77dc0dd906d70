"""Tools come from the entry-point registry, built-ins like plugins."""

from __future__ import annotations

import pytest

from vikingbot.errors import NotConfiguredError
from vikingbot.tools.registry import load_tool, load_tools, tool_names

BUILTIN_READ_ONLY = {
    "read_file": True,
    "list_dir": True,
    "glob": True,
    "grep": True,
    "write_file": False,
    "edit_file": False,
    "exec": False,
    "web_fetch": False,
    "message": False,
}


def test_builtins_are_registered_with_their_read_only_flags() -> None:
    tools = load_tools(list(BUILTIN_READ_ONLY))
    assert {name: t.read_only for name, t in tools.items()} == BUILTIN_READ_ONLY
    for name, tool in tools.items():
        schema = tool.schema()
        assert schema.name == name
        assert schema.parameters["type"] == "object"
        assert schema.description
    assert set(BUILTIN_READ_ONLY) <= set(tool_names())


def test_unknown_tool() -> None:
    with pytest.raises(NotConfiguredError, match="unknown tool 'nope'"):
        load_tool("nope")
    assert "nope" not in load_tools(["read_file", "nope"])
