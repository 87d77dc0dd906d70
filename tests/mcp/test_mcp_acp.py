"""The ACP loop hands the configured MCP servers to the agent in session/new."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from vikingbot.agent.acp_loop import AcpLoop
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey

pytest.importorskip("acp")

SERVERS = {
    "local": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ_HINT": "${HINT}"}},
    "remote": {"url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer ${HINT}"}},
    "legacy": {"type": "sse", "url": "https://old.example/sse"},
    "off": {"command": "x", "enabled": False},
}


async def sessions_given(
    tmp_path: Path, script: dict[str, Any], meta: dict[str, Any], heartbeat: dict[str, Any]
) -> list[dict[str, Any]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "script.json").write_text(json.dumps({"*": [{"text": "ok"}], **script}))
    log = tmp_path / "agent.jsonl"
    agent = {
        "command": sys.executable,
        "args": ["-m", "vikingbot.testing.fake_acp_agent", str(tmp_path / "script.json"), str(log)],
        "startupTimeoutS": 10,
    }
    config = Config.model_validate(
        {
            "bot": {
                "agents": {"loop": "acp", "acp": agent},
                "tools": {"mcpServers": SERVERS},
                "heartbeat": heartbeat,
            }
        }
    )
    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    sessions = SessionStore(tmp_path / "sessions", clock=FakeClock())
    loop = AcpLoop(config, sessions=sessions, environ={"HINT": "s3cr3t-value"})
    try:
        result = await loop.run_turn(
            "hi", SessionKey("cli", "d", "x"), {"workspace": str(ws), **meta}
        )
        assert result.text == "ok", result
    finally:
        await loop.aclose()
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    (new,) = [r for r in rows if r["kind"] == "new_session"]
    return list(new["mcp_servers"])


async def test_stdio_servers_always_and_http_only_where_the_agent_takes_it(tmp_path: Path) -> None:
    plain = await sessions_given(tmp_path / "a", {}, {}, {})
    assert [s["name"] for s in plain] == ["local"]
    (local,) = plain
    assert local["command"] == "uvx" and local["args"] == ["mcp-server-time"]
    assert local["env"] == [{"name": "TZ_HINT", "value": "s3cr3t-value"}]  # ${VAR} expanded

    http = await sessions_given(tmp_path / "b", {"_mcp": {"http": True}}, {}, {})
    assert [(s["name"], s.get("type")) for s in http] == [("local", None), ("remote", "http")]
    assert http[1]["headers"] == [{"name": "Authorization", "value": "Bearer s3cr3t-value"}]


async def test_heartbeat_mcp_servers_limits_what_an_unattended_session_gets(tmp_path: Path) -> None:
    unattended = {"heartbeat": True, "unattended": True}
    none = await sessions_given(tmp_path / "a", {}, unattended, {"mcpServers": []})
    assert none == []
    named = {"mcpServers": ["local"], "safeTools": ["mcp__local__get_current_time"]}
    some = await sessions_given(tmp_path / "b", {}, unattended, named)
    assert [s["name"] for s in some] == ["local"]
    # allowed by mcp_servers, but safe_tools names none of its tools: not handed over
    unnamed = await sessions_given(tmp_path / "c", {}, unattended, {"mcpServers": ["local"]})
    assert unnamed == []
