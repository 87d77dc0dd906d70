"""A scripted ACP agent, written with the official SDK, for tests and benches.

Run as ``python -m vikingbot.testing.fake_acp_agent SCRIPT.json [LOG.jsonl]``.
The script maps a prompt's text (the last text block; ``"*"`` for any other)
to a list of steps, replayed in order when that prompt arrives:

    {"text": "hello"}                              a reply chunk
    {"tool": {"title": "Edit a.txt", "kind": "edit", "status": "completed",
              "output": "done"}}                   a tool call and its result
    {"permission": {"title": "Run ls", "kind": "execute"}}
                                                   ask leave; says "allowed"/"refused"
    {"read": "notes.md"} / {"write": {"path": "a", "content": "x"}}
                                                   fs requests; say what came back
    {"flood": 5000}                                that many one-word chunks
    {"hang": true, "ignore_cancel": false}         never answer (until cancelled)
    {"crash": 3}                                   exit at once with status 3
    {"garbage": "not json"}                        write a raw line to stdout
    {"stop": "refusal"}                            end with that stop reason

Top-level keys ``"_startup"`` choose a fault before any prompt: ``"exit"``
(exit 2 at once), ``"silent"`` (never answer ``initialize``), ``"garbage"``
(write garbage lines, never answer). ``"_load_session": true`` offers
``session/load``. Every request received is appended to LOG as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any


class ScriptedAgent:
    def __init__(self, script: dict[str, Any], log: Path | None) -> None:
        self.script = script
        self.log_path = log
        self.conn: Any = None
        self.cancelled: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    def log(self, kind: str, **data: Any) -> None:
        if self.log_path is not None:
            with self.log_path.open("a") as fh:
                fh.write(json.dumps({"kind": kind, "pid": os.getpid(), **data}) + "\n")

    async def initialize(self, protocol_version: int, **kwargs: Any) -> Any:
        from acp import PROTOCOL_VERSION, InitializeResponse
        from acp.schema import AgentCapabilities

        self.log("initialize", protocol_version=protocol_version)
        caps = AgentCapabilities(load_session=bool(self.script.get("_load_session")))
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=caps)

    async def new_session(self, cwd: str, **kwargs: Any) -> Any:
        from acp import NewSessionResponse

        sid = uuid.uuid4().hex[:12]
        self.log("new_session", cwd=cwd, session_id=sid)
        return NewSessionResponse(session_id=sid)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> Any:
        from acp import LoadSessionResponse

        self.log("load_session", cwd=cwd, session_id=session_id)
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.log("cancel", session_id=session_id)
        self.cancelled.add(session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        from acp import PromptResponse

        texts = [getattr(b, "text", "") for b in prompt]
        self.log("prompt", session_id=session_id, texts=texts)
        steps = self.script.get(texts[-1] if texts else "", self.script.get("*", []))
        stop: Any = "end_turn"
        for step in steps:
            result = await self.step(session_id, step)
            if result is not None:
                stop = result
                break
        return PromptResponse(stop_reason=stop)

    async def say(self, session_id: str, text: str) -> None:
        from acp import update_agent_message_text

        await self.conn.session_update(session_id, update_agent_message_text(text))

    async def step(self, sid: str, step: dict[str, Any]) -> str | None:
        from acp import start_tool_call, text_block, update_tool_call
        from acp.schema import ContentToolCallContent, PermissionOption, ToolCallUpdate

        if "text" in step:
            await self.say(sid, step["text"])
        elif "tool" in step:
            t = step["tool"]
            call_id = uuid.uuid4().hex[:8]
            start = start_tool_call(call_id, t["title"], kind=t.get("kind"), status="pending")
            await self.conn.session_update(sid, start)
            update = update_tool_call(
                call_id,
                status=t.get("status", "completed"),
                content=[
                    ContentToolCallContent(type="content", content=text_block(t.get("output", "")))
                ],
            )
            await self.conn.session_update(sid, update)
        elif "permission" in step:
            p = step["permission"]
            call = ToolCallUpdate(tool_call_id="p1", title=p["title"], kind=p.get("kind"))
            options = [
                PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                PermissionOption(option_id="no", name="Reject", kind="reject_once"),
            ]
            resp = await self.conn.request_permission(sid, call, options)
            chosen = getattr(resp.outcome, "option_id", None)
            await self.say(sid, "allowed" if chosen == "yes" else "refused")
        elif "read" in step:
            try:
                got = await self.conn.read_text_file(sid, step["read"])
                await self.say(sid, f"read: {got.content}")
            except Exception as exc:
                await self.say(sid, f"read error: {exc} {getattr(exc, 'data', '')}")
        elif "write" in step:
            w = step["write"]
            try:
                await self.conn.write_text_file(sid, w["path"], w["content"])
                await self.say(sid, "written")
            except Exception as exc:
                await self.say(sid, f"write error: {exc} {getattr(exc, 'data', '')}")
        elif "flood" in step:
            for _ in range(int(step["flood"])):
                await self.say(sid, "word ")
        elif "hang" in step:
            while step.get("ignore_cancel") or sid not in self.cancelled:
                await asyncio.sleep(0.01)
            return "cancelled"
        elif "crash" in step:
            sys.stdout.flush()
            os._exit(int(step["crash"]))
        elif "garbage" in step:
            sys.stdout.write(step["garbage"] + "\n")
            sys.stdout.flush()
        elif "stop" in step:
            return str(step["stop"])
        return None


async def _fault(kind: str) -> None:
    if kind == "exit":
        sys.stderr.write("fake agent: exiting at once as scripted\n")
        sys.exit(2)
    if kind == "garbage":
        for _ in range(3):
            sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
    await asyncio.Event().wait()  # silent: never answer


def main() -> None:
    script = json.loads(Path(sys.argv[1]).read_text())
    log = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    fault = script.get("_startup")
    if fault:  # before importing the SDK: a fault shows at once
        asyncio.run(_fault(fault))
        return
    from acp import run_agent

    asyncio.run(run_agent(ScriptedAgent(script, log)))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
