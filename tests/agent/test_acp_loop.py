"""The acp loop against the scripted ACP agent (a real process speaking ACP over stdio)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from vikingbot.agent.acp_loop import AcpLoop
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey
from vikingbot.store.db import StateStore

pytest.importorskip("acp")

CHAT = SessionKey("telegram", "default", "42")
HB = SessionKey("heartbeat", "default", "shared")


class Rig:
    def __init__(self, tmp: Path, sessions: SessionStore, clock: FakeClock) -> None:
        self.tmp = tmp
        self.sessions = sessions
        self.clock = clock
        self.script_file = tmp / "script.json"
        self.log_file = tmp / "agent.jsonl"
        self.workspace = tmp / "ws"
        self.workspace.mkdir()
        self.store = StateStore.open(f"sqlite:///{tmp / 'state.db'}", clock=clock)
        self.loops: list[AcpLoop] = []

    def config(self, **acp: Any) -> Config:
        fields = {
            "command": sys.executable,
            "args": [
                "-m",
                "vikingbot.testing.fake_acp_agent",
                str(self.script_file),
                str(self.log_file),
            ],
            "startupTimeoutS": 10,
            **acp,
        }
        return Config.model_validate(
            {
                "bot": {
                    "agents": {"loop": "acp", "acp": fields},
                    "heartbeat": {"safeTools": ["read_file", "grep", "list_dir", "message"]},
                }
            }
        )

    def loop(self, script: dict[str, Any], **kw: Any) -> AcpLoop:
        self.script_file.write_text(json.dumps(script))
        acp = {k: v for k, v in kw.items() if k != "approval_callback"}
        loop = AcpLoop(
            self.config(**acp),
            sessions=self.sessions,
            store=self.store,
            clock=self.clock,
            approval_callback=kw.get("approval_callback"),
        )
        self.loops.append(loop)
        return loop

    def meta(self, **extra: Any) -> dict[str, Any]:
        return {"workspace": str(self.workspace), **extra}

    def log(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.log_file.exists():
            return []
        rows = [json.loads(x) for x in self.log_file.read_text().splitlines()]
        return [r for r in rows if kind is None or r["kind"] == kind]


@pytest.fixture
async def rig(tmp_path: Path, sessions: SessionStore, clock: FakeClock) -> AsyncIterator[Rig]:
    r = Rig(tmp_path, sessions, clock)
    yield r
    for loop in r.loops:
        await loop.aclose()
    r.store.close()


async def test_streamed_chunks_are_the_reply_and_history_is_written(rig: Rig) -> None:
    loop = rig.loop({"*": [{"text": "Hello, "}, {"text": "Astrid."}]})
    assert loop.readiness().ready
    result = await loop.run_turn("hi", CHAT, rig.meta())
    assert (result.text, result.ended, result.error) == ("Hello, Astrid.", "final", None)
    assert [(m.role, m.content) for m in rig.sessions.read_messages(CHAT)] == [
        ("user", "hi"),
        ("assistant", "Hello, Astrid."),
    ]
    [prompt] = rig.log("prompt")
    assert prompt["texts"][-1] == "hi"
    assert "SOUL.md" in prompt["texts"][0] or "vikingbot" in prompt["texts"][0]
    [new] = rig.log("new_session")
    assert new["cwd"] == str(rig.workspace)
    # one process, one ACP session per vikingbot session across turns
    await loop.run_turn("again", CHAT, rig.meta())
    assert len(rig.log("new_session")) == 1 and len(rig.log("initialize")) == 1


async def test_tool_calls_are_recorded_so_wrote_and_tools_run_stay_true(rig: Rig) -> None:
    loop = rig.loop(
        {
            "*": [
                {"tool": {"title": "Read notes.md", "kind": "read", "output": "milk"}},
                {"tool": {"title": "Edit notes.md", "kind": "edit", "output": "ok"}},
                {"tool": {"title": "Run tests", "kind": "execute", "status": "failed"}},
                {"text": "done"},
            ]
        }
    )
    result = await loop.run_turn("tidy up", CHAT, rig.meta())
    assert result.tools_run == ["Read notes.md", "Edit notes.md"]
    assert [c.read_only for c in result.tool_calls] == [True, False, False]
    assert result.tool_calls[2].error is True
    assert result.wrote is True


async def test_unattended_permissions_go_by_kind_never_by_title(rig: Rig) -> None:
    """The red-team requests of issue 38: a title naming a safe tool does not widen a kind."""
    loop = rig.loop(
        {
            "*": [
                {"permission": {"title": "read_file", "kind": "delete"}},
                {"permission": {"title": "message", "kind": "execute"}},
                {"permission": {"title": "list_dir", "kind": "execute"}},
                {"permission": {"title": "Fetch the weather", "kind": "fetch"}},
                {"permission": {"title": "Look at a.txt", "kind": "read"}},
                {"permission": {"title": "exec", "kind": "read"}},  # a title only narrows
                {"permission": {"title": "Grep for TODO", "kind": "search"}},
            ]
        }
    )
    result = await loop.run_turn("check", HB, rig.meta(heartbeat=True, unattended=True))
    assert result.text == "refused" * 4 + "allowed" + "refused" + "allowed"
    audit = rig.store.audit_events(limit=20)
    rows = sorted((e["action"], e["subject"], e["details"]["title"]) for e in audit)
    assert rows == [
        ("tool.approve", "acp:read", "Look at a.txt"),
        ("tool.approve", "acp:search", "Grep for TODO"),
        ("tool.deny", "acp:delete", "read_file"),
        ("tool.deny", "acp:execute", "list_dir"),
        ("tool.deny", "acp:execute", "message"),
        ("tool.deny", "acp:fetch", "Fetch the weather"),
        ("tool.deny", "acp:read", "exec"),
    ]
    assert all(e["details"]["kind"] for e in audit)
    refused = [c.name for c in result.tool_calls if not c.approved]
    assert refused == ["read_file", "message", "list_dir", "Fetch the weather", "exec"]


async def test_chat_permission_asks_the_person(rig: Rig) -> None:
    asked: list[str] = []

    async def person(name: str, args: dict[str, Any]) -> bool:
        asked.append(name)
        return True

    loop = rig.loop(
        {"*": [{"permission": {"title": "Run ls", "kind": "execute"}}]}, approval_callback=person
    )
    result = await loop.run_turn("list", CHAT, rig.meta())
    assert (result.text, asked) == ("allowed", ["acp:execute 'Run ls'"])


async def test_fs_is_confined_to_the_workspace(rig: Rig, tmp_path: Path) -> None:
    (rig.workspace / "notes.md").write_text("one\ntwo\nthree\n")
    (tmp_path / "secret.txt").write_text("top secret")
    loop = rig.loop(
        {
            "*": [
                {"read": str(rig.workspace / "notes.md")},
                {"read": str(tmp_path / "secret.txt")},
                {"write": {"path": str(rig.workspace / "out.md"), "content": "new"}},
                {"write": {"path": str(tmp_path / "escape.md"), "content": "x"}},
            ]
        }
    )
    result = await loop.run_turn("files", CHAT, rig.meta())
    text = result.text or ""
    assert "read: one\ntwo\nthree\n" in text
    assert "top secret" not in text and "outside the workspace" in text
    assert (rig.workspace / "out.md").read_text() == "new"
    assert not (tmp_path / "escape.md").exists()
    assert text.count("outside the workspace") == 2
    assert result.wrote is True


async def test_a_heartbeat_write_takes_the_heartbeat_lock(rig: Rig) -> None:
    from filelock import FileLock

    from vikingbot.fsutil import lock_path

    hb = rig.workspace / "HEARTBEAT.md"
    hb.write_text("- old\n")
    loop = rig.loop({"*": [{"write": {"path": str(hb), "content": "- new\n"}}]})
    lock = FileLock(str(lock_path(hb)))
    with lock:  # a heartbeat rewrite is in progress
        turn = asyncio.create_task(loop.run_turn("edit", CHAT, rig.meta()))
        await asyncio.sleep(0.3)
        assert hb.read_text() == "- old\n"  # the agent's write waits for the lock
    result = await turn
    assert result.text == "written"
    assert hb.read_text() == "- new\n"


async def test_heartbeat_ok_leaves_no_history_and_a_reset_session_gets_a_new_acp_session(
    rig: Rig,
) -> None:
    loop = rig.loop({"*": [{"text": "HEARTBEAT_OK"}]})
    meta = rig.meta(heartbeat=True, unattended=True)
    result = await loop.run_turn("check the list", HB, meta)
    assert result.text == "HEARTBEAT_OK"
    assert rig.sessions.read_messages(HB) == []
    rig.clock.advance(seconds=60)
    rig.sessions.reset(HB)  # the heartbeat recycles its session
    await loop.run_turn("check the list", HB, meta)
    assert len(rig.log("new_session")) == 2


async def test_a_timeout_sends_cancel_and_the_turn_ends_in_time(rig: Rig) -> None:
    loop = rig.loop({"*": [{"hang": True}]})
    await loop.start()  # the process is up: the timeout is the prompt's
    t0 = time.monotonic()
    result = await loop.run_turn("wait", CHAT, rig.meta(timeout_s=0.5))
    assert time.monotonic() - t0 < 5
    assert result.ended == "timeout"
    assert len(rig.log("cancel")) == 1
    assert [m.content for m in rig.sessions.read_messages(CHAT)] == ["wait"]


async def test_an_agent_that_ignores_cancel_is_killed_and_replaced(rig: Rig) -> None:
    loop = rig.loop({"wait": [{"hang": True, "ignore_cancel": True}], "*": [{"text": "fresh"}]})
    loop.cancel_grace_s = 0.3
    await loop.start()
    result = await loop.run_turn("wait", CHAT, rig.meta(timeout_s=0.3))
    assert result.ended == "timeout"
    again = await loop.run_turn("hello", CHAT, rig.meta())
    assert again.text == "fresh"
    pids = {r["pid"] for r in rig.log("initialize")}
    assert len(pids) == 2  # the next turn started a fresh process


async def test_a_crash_mid_turn_is_a_clear_error_and_the_next_turn_restarts(rig: Rig) -> None:
    loop = rig.loop({"boom": [{"text": "partial"}, {"crash": 3}], "*": [{"text": "back"}]})
    result = await loop.run_turn("boom", CHAT, rig.meta())
    assert result.ended == "error"
    assert "stopped during the turn" in (result.error or "")
    assert "exited with status 3" in (result.error or "")
    assert (await loop.run_turn("hello", CHAT, rig.meta())).text == "back"


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("exit", "exited with status 2"),
        ("silent", "did not answer initialize within 0.5s"),
        ("garbage", "3 line(s) that are not JSON-RPC"),
    ],
)
async def test_startup_faults_name_the_agent_and_what_it_did(
    rig: Rig, fault: str, said: str
) -> None:
    loop = rig.loop({"_startup": fault}, startupTimeoutS=0.5 if fault == "silent" else 3)
    t0 = time.monotonic()
    result = await loop.run_turn("hi", CHAT, rig.meta())
    assert time.monotonic() - t0 < 5
    assert result.ended == "error"
    assert said in (result.error or "")
    assert "python" in (result.error or "")  # the agent is named


async def test_a_missing_program_is_not_ready_and_says_what_to_set(rig: Rig) -> None:
    loop = rig.loop({}, command="no-such-acp-agent-vb")
    ready = loop.readiness()
    assert not ready.ready
    assert "'no-such-acp-agent-vb' was not found" in (ready.problem or "")
    result = await loop.run_turn("hi", CHAT, rig.meta())
    assert result.ended == "error" and "could not be started" in (result.error or "")


async def test_a_flood_of_updates_is_capped(rig: Rig) -> None:
    loop = rig.loop({"*": [{"flood": 3000}]}, maxUpdateChars=1000)
    result = await loop.run_turn("talk", CHAT, rig.meta())
    text = result.text or ""
    assert text.startswith("word word")
    assert "the agent sent 14000 more characters" in text


async def test_session_load_is_used_after_a_restart_when_offered(rig: Rig) -> None:
    loop = rig.loop({"_load_session": True, "boom": [{"crash": 1}], "*": [{"text": "ok"}]})
    await loop.run_turn("hello", CHAT, rig.meta())
    [first] = rig.log("new_session")
    await loop.run_turn("boom", CHAT, rig.meta())
    await loop.run_turn("hello", CHAT, rig.meta())
    assert [r["session_id"] for r in rig.log("load_session")] == [first["session_id"]]
    assert len(rig.log("new_session")) == 1


async def test_a_result_delivered_into_the_chat_is_shown_to_the_agent_next_turn(
    rig: Rig,
) -> None:
    from vikingbot.session.types import Message

    loop = rig.loop({"*": [{"text": "ok"}]})
    await loop.run_turn("hi", CHAT, rig.meta())
    rig.sessions.append(
        CHAT,
        Message(
            "assistant",
            "Passport expires soon.",
            rig.clock.now(),
            metadata={"delivered_from": "heartbeat:shared", "bookkeeping": True},
        ),
    )
    await loop.run_turn("what about it?", CHAT, rig.meta())
    last = rig.log("prompt")[-1]["texts"]
    assert "Passport expires soon." in last[0] and last[-1] == "what about it?"
    assert len(rig.log("new_session")) == 1  # the same ACP session goes on


async def test_a_changed_agent_config_starts_the_new_agent_at_the_next_turn(rig: Rig) -> None:
    loop = rig.loop({"*": [{"text": "one"}]})
    assert (await loop.run_turn("hi", CHAT, rig.meta())).text == "one"
    rig.script_file.write_text(json.dumps({"*": [{"text": "two"}]}))
    loop.reconfigure(rig.config(env={"MARK": "2"}))
    assert (await loop.run_turn("hi", CHAT, rig.meta())).text == "two"
    assert len({r["pid"] for r in rig.log("initialize")}) == 2


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("not json at all", "wrote 1 line(s) that are not JSON-RPC, e.g. 'not json at all'"),
        ("x" * (16 * 1024 * 1024 + 10), "wrote 1 message(s) over 16777216 bytes (dropped)"),
    ],
)
async def test_a_protocol_error_mid_turn_ends_it_with_the_documented_error(
    rig: Rig, bad: str, said: str
) -> None:
    """Issue 38: garbage (or a dropped oversize line) ends the turn now, not at its timeout."""
    loop = rig.loop(
        {"bad": [{"text": "partial"}, {"garbage": bad}, {"hang": True}], "*": [{"text": "back"}]},
        timeoutS=30,
    )
    t0 = time.monotonic()
    result = await loop.run_turn("bad", CHAT, rig.meta())
    assert time.monotonic() - t0 < 10
    assert (result.ended, result.provider_down) == ("error", True)
    assert said in (result.error or "")
    assert (await loop.run_turn("hello", CHAT, rig.meta())).text == "back"
    assert len({r["pid"] for r in rig.log("initialize")}) == 2  # a fresh process


async def test_fs_reads_of_pipes_and_devices_are_refused_at_once(rig: Rig) -> None:
    os.mkfifo(rig.workspace / "pipe")
    (rig.workspace / "zero").symlink_to("/dev/zero")
    steps: list[dict[str, Any]] = [{"read": str(rig.workspace / "pipe")} for _ in range(10)]
    steps.append({"read": str(rig.workspace / "zero")})
    loop = rig.loop({"*": steps})
    t0 = time.monotonic()
    result = await loop.run_turn("read them", CHAT, rig.meta())
    assert time.monotonic() - t0 < 5
    text = result.text or ""
    assert text.count("not a regular file") == 10, text
    assert "outside the workspace" in text  # the symlink points out of it


async def test_skills_are_linked_where_claude_code_looks_and_listed_with_paths(
    rig: Rig, tmp_path: Path
) -> None:
    user = tmp_path / "home" / "skills"
    for root, name in ((user, "weekly-report"), (rig.workspace / "skills", "triage")):
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Does {name}.\n---\nStep one of {name}.\n"
        )
    links = rig.workspace / ".claude" / "skills"
    links.mkdir(parents=True)
    (links / "mine").mkdir()  # the user's own Claude skill: left alone
    (links / "gone").symlink_to(user / "gone")  # a skill that was removed since
    loop = rig.loop(
        {
            "*": [
                {"read": ".claude/skills/weekly-report/SKILL.md"},
                {"write": {"path": ".claude/skills/weekly-report/SKILL.md", "content": "x"}},
                {"read": str(tmp_path / "home" / "config.json")},
            ]
        }
    )
    loop.user_skills = user
    result = await loop.run_turn("hi", CHAT, rig.meta())

    assert sorted(p.name for p in links.iterdir()) == ["mine", "triage", "weekly-report"]
    assert os.readlink(links / "weekly-report") == str(user / "weekly-report")
    assert os.readlink(links / "triage") == str(rig.workspace / "skills" / "triage")
    text = result.text or ""
    assert "read: ---\nname: weekly-report" in text  # a read reaches the user's skills
    assert "Step one of weekly-report." in (user / "weekly-report" / "SKILL.md").read_text()
    assert text.count("outside the workspace") == 2  # never a write there, nor other files
    [prompt] = rig.log("prompt")
    context = prompt["texts"][0]
    assert "- weekly-report: Does weekly-report. (SKILL.md: " in context
    assert ".claude/skills/weekly-report/SKILL.md)" in context


async def test_pictures_go_as_image_blocks_only_to_an_agent_that_takes_them(rig: Rig) -> None:
    from vikingbot.providers.base import ImagePart

    pic = ImagePart("image/jpeg", b"\xff\xd8\xff" + b"x" * 300)
    loop = rig.loop({"_images": True, "*": [{"text": "a desk"}]})
    result = await loop.run_turn("what is it?", CHAT, rig.meta(images=[pic]))
    assert result.text == "a desk"
    [prompt] = rig.log("prompt")
    assert prompt["images"] == [{"mimeType": "image/jpeg", "chars": len(pic.b64())}]
    assert prompt["texts"][-1] == "what is it?"  # the text stays the last block
    await loop.aclose()
    rig.log_file.unlink()
    blind = rig.loop({"*": [{"text": "ok"}]})
    await blind.run_turn("and this?", CHAT, rig.meta(images=[pic]))
    [prompt] = rig.log("prompt")
    assert prompt["images"] == []
    assert "this agent does not take images" in prompt["texts"][-1]
