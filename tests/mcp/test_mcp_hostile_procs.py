"""A hostile stdio server (SIGTERM ignored, a ``setsid`` grandchild, 3,000 tools, tokens
planted in the gateway's environment) gets only PATH, HOME, locale, TZ, proxy and CA
settings plus its entry's ``env``, is offered capped, and is ended whole on stop; what
a killed gateway left is ended when the next hub starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.mcp.conftest import mcp_config
from tests.support.mcp_servers import faults
from vikingbot.mcp.client import MAX_TOOLS
from vikingbot.mcp.hub import McpHub


def marked(mark: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit():
                continue
            seen = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
            if mark.encode() in seen:
                state = (proc / "stat").read_bytes().rpartition(b")")[2].split()[0]
                if state != b"Z":
                    found.append(int(proc.name))
        except OSError:
            continue
    return found


def hostile(mark: str) -> dict[str, object]:
    return faults({"FAULT_IGNORE_TERM": "1", "FAULT_SETSID": mark, "FAULT_MARK": mark})


def wait_gone(mark: str, timeout: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


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


async def test_a_hostile_server_sees_no_token_is_offered_capped_and_ended_whole(
    tmp_path: Path,
) -> None:
    mark = f"hostile-a-{os.getpid()}"
    entry = hostile(mark)
    entry["env"] = {**entry["env"], "FAULT_MANY": "3000", "PIP_INDEX_URL": "${PIP_INDEX_URL}"}  # type: ignore[dict-item]
    config = mcp_config("http://127.0.0.1:9", {"h": entry})
    pins = tmp_path / "mcp" / "p.json"
    hub = McpHub(config, environ={**KEPT, **PLANTED}, logs=tmp_path, pins=pins)
    text, _ = await hub.call("h", "environ", {})
    seen = set(text.split("\n"))
    # what is kept, what the entry names, and what Python sets itself at start
    given = {*KEPT, *entry["env"]}  # type: ignore[misc]
    assert seen - {"LC_CTYPE", "PYTHONUNBUFFERED"} == given
    assert not seen & (set(PLANTED) - {"PIP_INDEX_URL"})
    assert len(await hub.tools_for(unattended=False)) == MAX_TOOLS  # of 3,000 and more
    assert len(marked(mark)) == 2  # the server (its env) and the grandchild
    began = time.monotonic()
    await hub.aclose()
    took = time.monotonic() - began
    assert wait_gone(mark) == []
    assert took < 4  # 0.5 s for stdin, 1 s after SIGTERM, then SIGKILL


CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from tests.mcp.conftest import mcp_config
from tests.support.mcp_servers import faults
from vikingbot.mcp.hub import McpHub

async def main():
    mark, tmp = sys.argv[1], Path(sys.argv[2])
    server = faults({"FAULT_IGNORE_TERM": "1", "FAULT_SETSID": mark, "FAULT_MARK": mark})
    hub = McpHub(mcp_config("http://127.0.0.1:9", {"h": server}), environ=dict(os.environ),
                 logs=tmp, pins=tmp / "mcp" / "p.json")
    await hub.call("h", "ok", {"text": "hi"})
    os.kill(os.getpid(), signal.SIGKILL)  # a gateway killed mid-run

asyncio.run(main())
"""


async def test_servers_a_killed_gateway_left_are_ended_at_the_next_start(tmp_path: Path) -> None:
    mark = f"hostile-b-{os.getpid()}"
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mark, str(tmp_path), root], timeout=120, check=False
    )
    assert done.returncode == -signal.SIGKILL
    assert len(marked(mark)) == 2  # left behind, running
    config = mcp_config("http://127.0.0.1:9", {"h": hostile(mark)})
    hub = McpHub(config, environ={}, logs=tmp_path, pins=tmp_path / "mcp" / "p.json")
    await hub.aclose()
    assert wait_gone(mark) == []
