"""Find and construct tools through the ``vikingbot.tools`` entry-point group.

Built-in tools and plugin tools come the same way. A tool that fails to import
or construct is left out with a logged reason (one broken plugin must not take
the agent down); asking for it by name raises instead.
"""

from __future__ import annotations

from loguru import logger

from vikingbot import registry
from vikingbot.errors import NotConfiguredError, VikingbotError
from vikingbot.tools.base import Tool


def tool_names() -> list[str]:
    """Registered tool names, sorted."""
    return registry.names("tools")


def load_tool(name: str) -> Tool:
    """Construct the tool registered as ``name``; raise ``NotConfiguredError`` if unusable."""
    cls = registry.load("tools", name)
    tool = cls()
    for attr in ("name", "description", "parameters", "read_only", "run"):
        if not hasattr(tool, attr):
            raise NotConfiguredError(f"tool plugin {name!r} ({cls!r}) has no {attr!r} attribute")
    if tool.name != name:
        raise NotConfiguredError(
            f"tool plugin registered as {name!r} calls itself {tool.name!r}; the names must match"
        )
    return tool  # type: ignore[no-any-return]


def load_tools(names: list[str] | None = None) -> dict[str, Tool]:
    """Construct the named tools (default: every registered tool), skipping broken ones."""
    tools: dict[str, Tool] = {}
    for name in names if names is not None else tool_names():
        try:
            tools[name] = load_tool(name)
        except (ImportError, AttributeError, TypeError, VikingbotError) as exc:
            logger.warning("tool {} is unavailable and left out: {}", name, exc)
    return tools
