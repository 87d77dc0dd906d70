"""A scripted model that acts on a heartbeat turn the way a real one does.

A responder for the loopback fakes (``FakeOpenAI.responder``): it knows the
task written in ``HEARTBEAT.md`` and

1. calls ``read_file`` on ``HEARTBEAT.md`` while the task's text is nowhere in
   what it was sent (a real model told "Read HEARTBEAT.md" does);
2. then calls every offered tool the task names in backticks (`` `message` ``,
   `` `exec` ``), once per turn, whether or not it would be allowed to run;
3. then answers ``HEARTBEAT_OK``.

It decides from the request alone (what is in the messages, which tools are
offered), so the same responder drives vikingbot and other bots over the same
wire format. ``chars`` is the size of a request as the benches count it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vikingbot.replies import OK_TOKEN
from vikingbot.testing.fake_llm import RecordedRequest, Step, reply, tool_call

FILE = "HEARTBEAT.md"
READ = "read_file"


def chars(request: RecordedRequest) -> int:
    """Input characters of one request: its messages and tool schemas as JSON."""
    body = request.body
    tools = body.get("tools") or []
    messages = json.dumps(body.get("messages") or [], ensure_ascii=False)
    return len(messages) + len(json.dumps(tools, ensure_ascii=False))


def _this_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages after the last user message that carries text (this turn's rounds)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return messages[i + 1 :]
    return messages


def _called(turn: list[dict[str, Any]]) -> set[str]:
    names: set[str] = set()
    for m in turn:
        for c in m.get("tool_calls") or []:
            names.add(str((c.get("function") or {}).get("name", "")))
    return names


def _schemas(request: RecordedRequest) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for t in request.body.get("tools") or []:
        fn = t.get("function", t)
        out[str(fn.get("name", ""))] = fn.get("parameters") or {}
    return out


@dataclass
class RealModel:
    """The responder; ``task`` is the text of the task in HEARTBEAT.md."""

    task: str
    say: str = "Time to stretch."

    def __call__(self, request: RecordedRequest) -> Step:
        turn = _this_turn(request.messages)
        called = _called(turn)
        offered = _schemas(request)
        if self.task not in request.text:
            if READ in offered and READ not in called:
                return tool_call(READ, self._args(READ, offered[READ], request))
            return reply(OK_TOKEN)  # could not read it: nothing to act on
        for name, schema in offered.items():
            if name in called or name == READ:
                continue
            if f"`{name}`" in self.task:
                return tool_call(name, self._args(name, schema, request))
        return reply(OK_TOKEN)

    def _args(self, name: str, schema: dict[str, Any], request: RecordedRequest) -> dict[str, Any]:
        args: dict[str, Any] = {}
        for key in schema.get("required") or []:
            low = key.lower()
            if "path" in low or "file" in low:
                args[key] = FILE
            elif "command" in low or "cmd" in low:
                args[key] = "df -h"
            else:
                args[key] = self.say
        if not args and "path" in (schema.get("properties") or {}):
            args["path"] = FILE
        return args
