"""What the model sees: workspace files in the system prompt, a repaired history window."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from vikingbot.agent.context import (
    EARLIER_NOTE,
    MAX_FILE_CHARS,
    MISSING_RESULT,
    history_messages,
    read_context_files,
    system_prompt,
)
from vikingbot.session.types import Message, SessionKey

T = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
KEY = SessionKey("telegram", "bot", "42")


def test_context_files_in_order_and_capped(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "MEMORY.md").write_text("likes tea")
    (tmp_path / "USER.md").write_text("Name: Astrid")
    (tmp_path / "SOUL.md").write_text("x" * (MAX_FILE_CHARS + 10))
    (tmp_path / "TOOLS.md").write_text("   \n")  # blank files are left out
    files = read_context_files(tmp_path)
    assert [name for name, _ in files] == ["SOUL.md", "USER.md", "memory/MEMORY.md"]
    assert files[0][1].endswith("[... SOUL.md truncated; read the rest with read_file]")


def test_system_prompt(tmp_path: Path) -> None:
    files = [("SOUL.md", "I am Ragnar."), ("USER.md", "Name: Astrid")]
    chat = system_prompt(
        tmp_path, files, now=T, timezone="Europe/Berlin", session_key=KEY, metadata={}
    )
    assert "Current time: 2026-03-02 10:30 CET (Monday)." in chat
    assert str(tmp_path) in chat
    assert "telegram chat telegram:bot:42" in chat
    assert chat.index("## SOUL.md\n\nI am Ragnar.") < chat.index("## USER.md\n\nName: Astrid")
    background = system_prompt(
        tmp_path, [], now=T, timezone=None, session_key=KEY, metadata={"heartbeat": True}
    )
    assert "Nobody is watching this turn" in background
    assert "`message` tool" in background


def m(role: str, content: str = "", **kw: object) -> Message:
    return Message(role, content, T, **kw)  # type: ignore[arg-type]


def test_history_window_is_repaired_for_providers() -> None:
    call = {"id": "c1", "name": "read_file", "arguments": {"path": "a"}}
    lost = {"id": "c2", "name": "exec", "arguments": {}}
    history = [
        m("tool", "orphan result", tool_call_id="c0"),  # its call fell out of the window
        m("assistant", "answer to something older"),
        m("user", "read a"),
        m("assistant", "", tool_calls=[call, lost]),
        m("tool", "contents", tool_call_id="c1"),
        m("tool", "stray", tool_call_id="zz"),
        m("system", "never replayed"),
        m("assistant", "done"),
        m("user", "thanks"),
    ]
    out = history_messages(history)
    assert [(x.role, x.content) for x in out] == [
        # a plain reply before the first user message is kept (e.g. a delivered result)
        ("user", EARLIER_NOTE),
        ("assistant", "answer to something older"),
        ("user", "read a"),
        ("assistant", ""),
        ("tool", "contents"),
        ("tool", MISSING_RESULT),
        ("assistant", "done"),
        ("user", "thanks"),
    ]
    assert [c.name for c in out[3].tool_calls] == ["read_file", "exec"]
    assert out[5].tool_call_id == "c2"
