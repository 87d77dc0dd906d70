"""The prompt says only what is true (issue 42, item 6): an unattended turn's text and
files never describe a tool it is not offered."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.support.harness import build_harness, with_tasks
from vikingbot.agent.offered import tools_note, workspace_line
from vikingbot.testing.fake_openai import FakeOpenAI
from vikingbot.workspace.template import template_dir

SHIPPED = (template_dir() / "TOOLS.md").read_text(encoding="utf-8")
KNOWN = {"read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "exec", "message"}
READ_ONLY = {"read_file", "list_dir", "glob", "grep", "message"}
NOT_OFFERED = re.compile(r"`(exec|write_file|edit_file)`")


def test_the_shipped_tools_md_loses_the_items_of_tools_not_offered() -> None:
    note = tools_note(SHIPPED, KNOWN, READ_ONLY)
    assert not NOT_OFFERED.search(note)
    assert "Avoid\n  anything destructive" not in note  # the item's continuation went too
    assert "`read_file`" in note and "`message`" in note
    assert "HEARTBEAT_OK" in note and "every: 30m" in note  # the protocol stays
    # everything offered: the file as written
    assert tools_note(SHIPPED, KNOWN, KNOWN) == SHIPPED


def test_the_workspace_line_names_only_what_is_offered() -> None:
    assert workspace_line("/w", READ_ONLY) == "Your workspace is /w; file tools work inside it."
    assert workspace_line("/w", {"message"}) == "Your workspace is /w."
    assert "commands" in workspace_line("/w", {"exec"})


@given(st.text(max_size=400), st.sets(st.sampled_from(sorted(KNOWN))))
def test_tools_note_is_total(text: str, offered: set[str]) -> None:
    note = tools_note(text, KNOWN, offered)
    assert isinstance(note, str) and len(note) <= len(text)


async def test_a_full_context_heartbeat_turn_never_describes_tools_it_lacks(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake = fake_openai
    async for h in build_harness(tmp_path, fake):
        h.rt.config.bot.heartbeat.context = "full"
        ws = h.write(with_tasks("- Tell me if the backup failed")).parent
        (ws / "TOOLS.md").write_text(SHIPPED, encoding="utf-8")
        h.user_session()
        await h.cycle()
        (request,) = fake.requests
        offered = set(request.tool_names)
        assert not offered & {"exec", "write_file", "edit_file"}
        assert "## TOOLS.md" in request.system  # the file is there, minus those items
        assert not NOT_OFFERED.search(request.text)
        assert "file tools when you learn" not in request.system
        assert "edit it with the file tools" not in request.last_user_text
        assert "commands work" not in request.system
