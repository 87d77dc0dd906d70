"""MCP servers as tools (docs/mcp.md).

``naming`` (pure: ``mcp_<server>_<tool>``), ``results`` (pure: a result as capped
text), ``client`` (one server's session on the official SDK), ``hub`` (the servers of
one gateway or CLI run: start on use, share, restart, idle stop, stop all), ``tool``
(a server tool as a ``tools.base.Tool``). The config model is
``vikingbot.config.mcp``; approval is ``agent.approval``'s one rule.
"""
