"""The variables a stdio MCP server sees, with tokens planted in the gateway's environment.

    uv run --all-extras --dev python bench/mcp_environ.py

Starts tests/support/mcp_faults.py (official MCP SDK) through vikingbot's MCP hub with
the gateway's own environment plus seven planted token-bearing variables, and asks the
server (its ``environ`` tool) which variable names it got. Target: only PATH, HOME,
locale, TZ, proxy/CA settings and the entry's ``env``; 0 planted tokens.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.mcp.conftest import mcp_config
from tests.support.mcp_servers import faults
from vikingbot.mcp.hub import McpHub
from vikingbot.mcp.stdio import inherited

PLANTED = {
    "UV_PUBLISH_TOKEN": "pypi-planted",
    "UV_INDEX_3_PASSWORD": "planted",
    "PIP_INDEX_URL": "https://u:planted@pypi.example/simple",
    "NPM_CONFIG__AUTH": "planted",
    "npm_config_//registry.npmjs.org/:_authToken": "planted",
    "PYENV_GITHUB_TOKEN": "ghp_planted",
    "GITHUB_TOKEN": "ghp_planted2",
}


async def main() -> None:
    environ = {**os.environ, **PLANTED}
    config = mcp_config("http://127.0.0.1:9", {"f": faults({"GIVEN_BY_ENTRY": "1"})})
    with tempfile.TemporaryDirectory() as logs:
        hub = McpHub(config, environ=environ, logs=Path(logs), turn_wait_s=120)
        try:
            text, _ = await hub.call("f", "environ", {})
        finally:
            await hub.aclose()
    seen = sorted(text.split("\n"))
    leaked = sorted(set(seen) & set(PLANTED))
    print(f"gateway environment: {len(environ)} variables, {len(PLANTED)} planted tokens")
    print(f"passed on by rule: {sorted(inherited(environ))}")
    print(f"server saw {len(seen)} variables: {seen}")
    print(f"planted tokens the server saw: {len(leaked)} of {len(PLANTED)} {leaked}")


if __name__ == "__main__":
    asyncio.run(main())
