"""Where the real MCP servers ``.ci/run`` installs live, and configs that start them.

``mcp-server-time`` (PyPI) sits in its own venv, ``server-everything`` (npm) in a
prefix, both under ``~/.cache/vikingbot/mcp-servers``. A test that needs one and
does not find it fails under CI (``CI=true``: the install should have worked) and
skips elsewhere, naming the command that installs it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port

MCP_DIR = Path.home() / ".cache" / "vikingbot" / "mcp-servers"
TIME = MCP_DIR / "time" / "bin" / "mcp-server-time"
EVERYTHING = MCP_DIR / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
FAULTS = Path(__file__).with_name("mcp_faults.py")


def need(path: Path, what: str) -> str:
    """``path`` as a string, or fail (CI) / skip (elsewhere) saying how to install ``what``."""
    if path.exists():
        return str(path)
    message = f"{what} is not installed at {path}; .ci/run installs it"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def time_server(**extra: Any) -> dict[str, Any]:
    """``mcp-server-time`` over stdio (PyPI)."""
    return {"command": need(TIME, "mcp-server-time"), **extra}


def everything(**extra: Any) -> dict[str, Any]:
    """``@modelcontextprotocol/server-everything`` over stdio (npm)."""
    return {"command": need(EVERYTHING, "server-everything"), "args": ["stdio"], **extra}


def faults(env: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """The misbehaving SDK server of ``mcp_faults.py`` over stdio."""
    return {"command": sys.executable, "args": [str(FAULTS)], "env": env or {}, **extra}


@contextmanager
def everything_http() -> Iterator[str]:
    """server-everything serving Streamable HTTP on a free loopback port; yields its URL."""
    command = need(EVERYTHING, "server-everything")
    port = free_port()
    proc = subprocess.Popen(
        [command, "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # wait for the port to accept, not a fixed time
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("server-everything (HTTP) did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
