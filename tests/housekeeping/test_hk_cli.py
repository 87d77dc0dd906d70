"""`vikingbot sessions search` finds what was said, straight from the session files."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vikingbot.cli.app import app
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message


def test_sessions_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("VIKINGBOT_HOME", str(home))
    monkeypatch.delenv("VIKINGBOT_CONFIG", raising=False)
    sessions = SessionStore(home / "data" / "sessions")
    at = datetime(2026, 2, 3, 9, 30, tzinfo=UTC)
    sessions.append("telegram:default:7", Message("user", "Where did I park the blue van?", at))
    sessions.append("telegram:default:7", Message("assistant", "Level 3, bay 12.", at))
    runner = CliRunner()

    result = runner.invoke(app, ["sessions", "search", "blue van"])
    assert result.exit_code == 0, result.output
    # The listing style of cli/tables.py: the hit's time, session and role on its
    # row, the matching line whole (never cut) under it.
    lines = [line.rstrip() for line in result.stdout.strip().splitlines()]
    assert lines[0] == "Matches for 'blue van'"
    assert lines[3].split() == ["2026-02-03", "09:30", "telegram:default:7", "user"]
    assert lines[4].strip() == "Where did I park the **blue** **van**?"
    assert len(lines) == 5

    sessions.append("slack:T1:C1", Message("user", "the van needs new tyres", at))
    result = runner.invoke(app, ["sessions", "search", "van", "--json"])
    hits = json.loads(result.stdout)["hits"]
    assert sorted(h["session_key"] for h in hits) == ["slack:T1:C1", "telegram:default:7"]

    result = runner.invoke(app, ["sessions", "search", "submarine"])
    assert result.exit_code == 0 and "No matches for 'submarine'." in result.stdout
