"""The MCP servers an ACP agent is given in ``session/new`` / ``session/load``.

The agent (Claude Code, Codex, Gemini CLI) starts and calls them itself, so it sees
the same servers as the built-in loop: every enabled ``bot.tools.mcp_servers`` entry
(for a session of unattended turns only those ``bot.heartbeat.mcp_servers`` allows
and ``bot.heartbeat.safe_tools`` names a tool of),
stdio always, HTTP and SSE only where the agent's ``mcpCapabilities`` says it can.
``${VAR}`` is expanded here; an entry whose variable is missing is left out with a
warning naming it. ``cwd`` has no place in ACP's stdio server and is not passed.
The agent asks leave for their tools like for any other (``acp_client``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.config.loader import expand_vars
from vikingbot.errors import ConfigError
from vikingbot.mcp.naming import names_a_tool_of

if TYPE_CHECKING:
    from vikingbot.config.schema import Config


def session_servers(
    config: Config, environ: Mapping[str, str], *, unattended: bool, transports: frozenset[str]
) -> list[Any]:
    """ACP ``McpServer`` values for a new session (SDK types; imported here only)."""
    from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer

    only = config.bot.heartbeat.mcp_servers if unattended else None
    safe = config.bot.heartbeat.safe_tools
    out: list[Any] = []
    for name, cfg in config.bot.tools.mcp_servers.items():
        if not cfg.enabled or (only is not None and name not in only):
            continue
        if unattended and not any(names_a_tool_of(e, name) for e in safe):
            continue  # nobody watching: a server no safe_tools entry names is not handed over
        if cfg.kind not in transports:
            logger.info(
                "MCP server {} ({}) not passed: the ACP agent does not take it", name, cfg.kind
            )
            continue

        def x(value: str, key: str, name: str = name) -> str:
            return expand_vars(value, environ, f"bot.tools.mcp_servers.{name}.{key}")

        try:
            if cfg.kind == "stdio":
                out.append(
                    McpServerStdio(
                        name=name,
                        command=x(cfg.command or "", "command"),
                        args=[x(a, "args") for a in cfg.args],
                        env=[
                            EnvVariable(name=k, value=x(v, f"env.{k}")) for k, v in cfg.env.items()
                        ],
                    )
                )
                continue
            headers = [
                HttpHeader(name=k, value=x(v, f"headers.{k}")) for k, v in cfg.headers.items()
            ]
            url = x(cfg.url or "", "url")
            if cfg.kind == "sse":
                out.append(SseMcpServer(type="sse", name=name, url=url, headers=headers))
            else:
                out.append(HttpMcpServer(type="http", name=name, url=url, headers=headers))
        except ConfigError as exc:
            logger.warning("MCP server {} not passed to the ACP agent: {}", name, exc)
    return out
