"""The bot as an MCP server: `vikingbot mcp serve` (stdio) and `/mcp` on the gateway
(Streamable HTTP), docs/mcp-server.md."""
