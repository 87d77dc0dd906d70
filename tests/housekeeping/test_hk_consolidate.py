"""Consolidation into memory/MEMORY.md: once per idle period, never losing the user's text."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from vikingbot.housekeeping.consolidate import append_section
from vikingbot.session.types import SessionKey

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import Housekeeping

TG = "telegram:default:42"
USER_TEXT = "# My memory\n\nI prefer tea over coffee.\nCaf\xe9 notes: \xff\xfe raw bytes".encode(
    "latin-1"
)


def _memory(hk: Housekeeping) -> Path:
    return hk.workspaces.workspace_for(SessionKey.parse(TG)) / "memory" / "MEMORY.md"


async def test_idle_session_is_summarised_once_and_user_text_is_kept(hk: Housekeeping) -> None:
    memory = _memory(hk)
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_bytes(USER_TEXT)  # not even valid UTF-8, and no final newline
    hk.clock.set(hk.now - timedelta(hours=8))
    hk.sessions.append(TG, hk.msg("user", "Book the flight to Oslo\nsecond line not shown", 0.34))
    hk.sessions.append(TG, hk.msg("assistant", "Booked.", 0.34))
    hk.sessions.append(TG, hk.msg("user", "hb", 0.33, metadata={"heartbeat": True}))
    hk.clock.set(hk.now)

    stats = await hk.service.consolidate_now()
    assert stats is not None and stats.consolidated == [TG]
    data = memory.read_bytes()
    assert data.startswith(USER_TEXT)
    added = data[len(USER_TEXT) :].decode("utf-8")
    assert "## 2026-03-01 · telegram:default:42" in added
    assert "Book the flight to Oslo" in added and "second line" not in added
    assert "1 message(s) from the user" in added  # heartbeat prompts are not the user's words

    assert (await hk.service.consolidate_now()).consolidated == []  # type: ignore[union-attr]
    assert memory.read_bytes() == data  # nothing new: nothing written

    memory.write_bytes(data + b"\n- user added this by hand\n")
    hk.sessions.append(TG, hk.msg("user", "Also rent a car in Bergen", 0))
    hk.clock.advance(hours=7)
    assert (await hk.service.consolidate_now()).consolidated == [TG]  # type: ignore[union-attr]
    final = memory.read_bytes()
    assert final.startswith(data + b"\n- user added this by hand\n")
    assert b"Bergen" in final and final.count(b"Oslo") == 1


async def test_active_and_background_sessions_are_left_alone(hk: Housekeeping) -> None:
    hk.sessions.append(TG, hk.msg("user", "still chatting", 0))  # updated just now
    hk.clock.set(hk.now - timedelta(days=1))
    hk.sessions.append("cron:default:digest", hk.msg("user", "cron prompt", 1))
    hk.sessions.append("heartbeat:default:shared", hk.msg("user", "hb prompt", 1))
    hk.clock.set(hk.now)
    stats = await hk.service.consolidate_now()
    assert stats is not None and stats.consolidated == []
    assert not _memory(hk).exists() or b"prompt" not in _memory(hk).read_bytes()


def test_a_section_already_written_is_not_written_twice(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("mine\n")
    assert append_section(path, "## s\n<!-- m -->\n", "<!-- m -->")
    assert not append_section(path, "## s\n<!-- m -->\n", "<!-- m -->")
    assert path.read_text() == "mine\n\n## s\n<!-- m -->\n"
