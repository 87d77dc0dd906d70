"""``bot.tools.mcp_servers.<name>``: one MCP server, as nanobot and OpenViking write it.

A stdio server has ``command`` (with ``args``, ``env``, ``cwd``); an HTTP server has
``url`` (with ``headers``). ``type`` is inferred when absent (``stdio`` for a command,
``streamableHttp`` for a URL); ``sse`` names a legacy SSE server. ``${VAR}`` in any
string is expanded when the server starts (``vikingbot.mcp.client``), so a missing
variable stops that one server with a clear error and the rest of the config loads.
Header values and ``env`` are masked wherever config is shown (``redact``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from vikingbot.config.base import Model

McpType = Literal["stdio", "streamableHttp", "sse"]
_TYPE_ALIASES = {
    "stdio": "stdio",
    "streamablehttp": "streamableHttp",
    "streamable_http": "streamableHttp",
    "streamable-http": "streamableHttp",
    "http": "streamableHttp",
    "sse": "sse",
}
_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class McpServerConfig(Model):
    """One MCP server (docs/mcp.md)."""

    type: McpType | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    enabled_tools: list[str] = Field(default_factory=lambda: ["*"])
    tool_timeout_s: float = Field(default=30, gt=0)
    eager: bool = False  # start with the gateway instead of on first use
    # flags whose following argument is a secret, beyond those naming a key, token,
    # secret or password (masked wherever the command line is shown)
    secret_args: list[str] = Field(default_factory=list)

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, value: object) -> object:
        if isinstance(value, str):
            found = _TYPE_ALIASES.get(value.strip().lower())
            if found is None:
                raise ValueError(
                    f"unknown MCP server type {value!r}; valid types: stdio, streamableHttp, sse"
                )
            return found
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if self.command and self.url:
            raise ValueError(
                "give either command (a stdio server) or url (an HTTP server), not both"
            )
        if not self.command and not self.url:
            raise ValueError("needs command (a stdio server) or url (an HTTP server)")
        kind = self.kind
        if kind == "stdio" and not self.command:
            raise ValueError("type stdio needs a command")
        if kind != "stdio" and not self.url:
            raise ValueError(f"type {kind} needs a url")
        return self

    @property
    def kind(self) -> McpType:
        """The transport: the given ``type``, else inferred from command / url."""
        if self.type is not None:
            return self.type
        return "stdio" if self.command else "streamableHttp"

    @property
    def identity(self) -> str:
        """What the server is, as configured: its command line or its URL (approvals bind
        to this, so an entry repointed elsewhere keeps no earlier approval)."""
        if self.kind == "stdio":
            return " ".join([self.command or "", *self.args])
        return f"{self.kind} {self.url}"

    @property
    def shown(self) -> str:
        """:attr:`identity` as shown to people: secrets in the arguments (after a flag
        naming a key, token, secret or password, or one in ``secret_args``) and key-like
        URL path segments masked, then every other known secret."""
        from vikingbot.redact import MASK, mask_command, mask_text, secret_path_parts

        if self.kind == "stdio":
            text = " ".join([self.command or "", *mask_command(self.args, self.secret_args)])
        else:
            url = self.url or ""
            for part in secret_path_parts(url):
                url = url.replace(part, MASK)
            text = f"{self.kind} {url}"
        return mask_text(text)


def check_server_names(names: list[str]) -> None:
    """Raise ``ValueError`` naming a server key that cannot become part of a tool name."""
    for name in names:
        if not _SERVER_NAME.match(name):
            raise ValueError(
                f"mcp_servers.{name}: a server name is 1-64 letters, digits, '_', '-' or '.', "
                "starting with a letter or digit"
            )
