"""A stdio MCP server sees only PATH, HOME, locale, TZ, proxy and CA settings of the
gateway's environment, plus its entry's ``env``: planted tokens stay behind."""

from __future__ import annotations

import os
from pathlib import Path

from tests.mcp.conftest import mcp_config
from tests.support.mcp_servers import faults
from vikingbot.mcp.hub import McpHub

PLANTED = {
    "UV_PUBLISH_TOKEN": "pypi-planted",
    "UV_INDEX_7_PASSWORD": "planted",
    "PIP_INDEX_URL": "https://user:planted@pypi.example/simple",
    "NPM_CONFIG__AUTH": "planted",
    "npm_config_//registry.npmjs.org/:_authToken": "planted",
    "PYENV_GITHUB_TOKEN": "ghp_planted",
    "OPENAI_API_KEY": "sk-planted",
}
KEPT = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/tmp/home-of-test",
    "LANG": "C.UTF-8",
    "LC_TIME": "C",
    "TZ": "UTC",
    "HTTPS_PROXY": "http://proxy.example:3128",
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
}


async def test_planted_tokens_never_reach_a_stdio_server(tmp_path: Path) -> None:
    entry = faults({"GIVEN_BY_ENTRY": "yes", "PIP_INDEX_URL": "${PIP_INDEX_URL}"})
    config = mcp_config("http://127.0.0.1:9", {"f": entry})
    hub = McpHub(config, environ={**KEPT, **PLANTED}, logs=tmp_path, turn_wait_s=120)
    try:
        text, error = await hub.call("f", "environ", {})
    finally:
        await hub.aclose()
    assert not error
    seen = set(text.split("\n"))
    # only what is kept, what the entry names, and what Python itself sets at start
    assert seen - {"LC_CTYPE", "PYTHONUNBUFFERED"} == {*KEPT, "GIVEN_BY_ENTRY", "PIP_INDEX_URL"}
    assert not seen & (set(PLANTED) - {"PIP_INDEX_URL"})
