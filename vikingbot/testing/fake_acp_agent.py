"""A scripted ACP agent for tests and benches.

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

It speaks ACP's wire protocol itself, with the standard library only:
JSON-RPC 2.0, one JSON object per line over stdin/stdout (asyncio for the
requests, each handled in its own task as the SDK does; a thread reading
stdin). So it starts fast: importing the official SDK (``agent-client-protocol``,
``import acp``) costs ~0.7 s of CPU for its pydantic schema, on every spawn.
The SDK is what vikingbot's own side of the connection uses; the method names,
field names and framing here are the ones it sends and expects. A request for
any other method is answered with -32601 "Method not found"; a notification
gets no reply.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from typing import Any

PROTOCOL_VERSION = 1
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RpcError(Exception):
    """A JSON-RPC error, either side's: ``str()`` is its message, as the SDK's ``RequestError``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data

    def to_obj(self) -> dict[str, Any]:
        return {"code": self.code, "message": str(self), "data": self.data}


def _need(params: dict[str, Any], *names: str) -> list[Any]:
    missing = [n for n in names if n not in params]
    if missing:
        errors = [{"type": "missing", "loc": [n], "msg": "Field required"} for n in missing]
        raise RpcError(INVALID_PARAMS, "Invalid params", {"errors": errors})
    return [params[n] for n in names]


def _new_id(nbytes: int) -> str:
    return os.urandom(nbytes).hex()


def _text_update(text: str) -> dict[str, Any]:
    return {"content": {"text": text, "type": "text"}, "sessionUpdate": "agent_message_chunk"}


class ScriptedAgent:
    def __init__(self, script: dict[str, Any], log: str | None) -> None:
        self.script = script
        self.log_path = log
        self.out = sys.stdout.buffer
        self.next_id = 0
        self.pending: dict[Any, asyncio.Future[Any]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.cancelled: set[str] = set()
        self.cancel_events: dict[str, asyncio.Event] = {}
        self.requests = {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/prompt": self.prompt,
        }

    # ----------------------------------------------------------- the wire

    def write_line(self, line: bytes) -> None:
        try:
            self.out.write(line)
            self.out.flush()
        except OSError:  # the client is gone (its end of stdout closed)
            os._exit(0)

    def send(self, message: dict[str, Any]) -> None:
        self.write_line((json.dumps(message, separators=(",", ":")) + "\n").encode())

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Ask the client; its error answer is raised as an ``RpcError``."""
        rid = self.next_id
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[rid] = future
        try:
            self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            return await future
        finally:
            self.pending.pop(rid, None)

    def read_stdin(self, loop: asyncio.AbstractEventLoop, eof: asyncio.Event) -> None:
        """In a thread: stdin cut into lines, each handed to the loop."""
        parts: list[bytes] = []
        try:
            while True:
                try:
                    chunk = os.read(0, 1 << 16)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                *lines, rest = chunk.split(b"\n")
                if lines:
                    lines[0] = b"".join([*parts, lines[0]])
                    parts.clear()
                    loop.call_soon_threadsafe(self.received, lines)
                if rest:
                    parts.append(rest)
            if parts:
                loop.call_soon_threadsafe(self.received, [b"".join(parts)])
            loop.call_soon_threadsafe(eof.set)
        except RuntimeError:  # the loop is closed: the process is ending
            pass

    def received(self, lines: list[bytes]) -> None:
        for line in lines:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                sys.stderr.write(f"fake agent: not JSON, ignored: {line[:200]!r}\n")
                continue
            if isinstance(message, dict):
                self.dispatch(message)

    def dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:  # an answer to one of ours
            future = self.pending.get(message.get("id"))
            if future is None or future.done():
                return
            if "error" in message:
                err = message.get("error") or {}
                future.set_exception(
                    RpcError(
                        err.get("code", INTERNAL_ERROR),
                        err.get("message", "Error"),
                        err.get("data"),
                    )
                )
            else:
                future.set_result(message.get("result"))
        elif "id" in message:
            task = asyncio.get_running_loop().create_task(self.answer(message))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif method == "session/cancel":  # the only notification an agent takes
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
                self.cancel(params["sessionId"])

    async def answer(self, message: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        method = message["method"]
        try:
            handler = self.requests.get(method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})
            params = message.get("params")
            if not isinstance(params, dict):
                raise RpcError(
                    INVALID_PARAMS, "Invalid params", {"errors": "params is not an object"}
                )
            reply["result"] = await handler(params)
        except RpcError as exc:
            reply["error"] = exc.to_obj()
        except Exception as exc:
            reply["error"] = RpcError(
                INTERNAL_ERROR, "Internal error", {"details": str(exc)}
            ).to_obj()
        self.send(reply)

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        eof = asyncio.Event()
        threading.Thread(target=self.read_stdin, args=(loop, eof), daemon=True).start()
        await eof.wait()
        for task in list(self.tasks):  # stdin closed: the client is done with us
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    # ----------------------------------------------------------- the agent

    def log(self, kind: str, **data: Any) -> None:
        if self.log_path is not None:
            with open(self.log_path, "a") as fh:
                fh.write(json.dumps({"kind": kind, "pid": os.getpid(), **data}) + "\n")

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        [protocol_version] = _need(params, "protocolVersion")
        self.log("initialize", protocol_version=protocol_version)
        caps = {"loadSession": bool(self.script.get("_load_session"))}
        return {"protocolVersion": PROTOCOL_VERSION, "agentCapabilities": caps}

    async def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = _need(params, "cwd", "mcpServers")[0]
        sid = _new_id(6)
        self.log("new_session", cwd=cwd, session_id=sid)
        return {"sessionId": sid}

    async def load_session(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd, session_id = _need(params, "cwd", "sessionId", "mcpServers")[:2]
        self.log("load_session", cwd=cwd, session_id=session_id)
        return {}

    def cancel(self, session_id: str) -> None:
        self.log("cancel", session_id=session_id)
        self.cancelled.add(session_id)
        self.cancel_events.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id, blocks = _need(params, "sessionId", "prompt")
        texts = [
            b.get("text", "") if isinstance(b, dict) and b.get("type") == "text" else ""
            for b in blocks
        ]
        self.log("prompt", session_id=session_id, texts=texts)
        steps = self.script.get(texts[-1] if texts else "", self.script.get("*", []))
        stop: Any = "end_turn"
        for step in steps:
            result = await self.step(session_id, step)
            if result is not None:
                stop = result
                break
        return {"stopReason": stop}

    def update(self, sid: str, update: dict[str, Any]) -> None:
        self.notify("session/update", {"sessionId": sid, "update": update})

    def say(self, sid: str, text: str) -> None:
        self.update(sid, _text_update(text))

    async def step(self, sid: str, step: dict[str, Any]) -> str | None:
        if "text" in step:
            self.say(sid, step["text"])
        elif "tool" in step:
            t = step["tool"]
            call_id = _new_id(4)
            start: dict[str, Any] = {"toolCallId": call_id, "title": t["title"]}
            if t.get("kind") is not None:
                start["kind"] = t["kind"]
            self.update(sid, {**start, "status": "pending", "sessionUpdate": "tool_call"})
            content = {"content": {"text": t.get("output", ""), "type": "text"}, "type": "content"}
            self.update(
                sid,
                {
                    "toolCallId": call_id,
                    "status": t.get("status", "completed"),
                    "content": [content],
                    "sessionUpdate": "tool_call_update",
                },
            )
        elif "permission" in step:
            p = step["permission"]
            call: dict[str, Any] = {"toolCallId": "p1"}
            if p.get("kind") is not None:
                call["kind"] = p["kind"]
            call["title"] = p["title"]
            options = [
                {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                {"optionId": "no", "name": "Reject", "kind": "reject_once"},
            ]
            resp = await self.request(
                "session/request_permission",
                {"sessionId": sid, "toolCall": call, "options": options},
            )
            outcome = resp.get("outcome") if isinstance(resp, dict) else None
            chosen = None
            if isinstance(outcome, dict) and outcome.get("outcome") == "selected":
                chosen = outcome.get("optionId")
            self.say(sid, "allowed" if chosen == "yes" else "refused")
        elif "read" in step:
            try:
                got = await self.request(
                    "fs/read_text_file", {"sessionId": sid, "path": step["read"]}
                )
                if not isinstance(got, dict) or not isinstance(got.get("content"), str):
                    raise ValueError(f"fs/read_text_file answered without content: {got!r}")
                self.say(sid, f"read: {got['content']}")
            except Exception as exc:
                self.say(sid, f"read error: {exc} {getattr(exc, 'data', '')}")
        elif "write" in step:
            w = step["write"]
            try:
                params = {"sessionId": sid, "path": w["path"], "content": w["content"]}
                await self.request("fs/write_text_file", params)
                self.say(sid, "written")
            except Exception as exc:
                self.say(sid, f"write error: {exc} {getattr(exc, 'data', '')}")
        elif "flood" in step:
            for _ in range(int(step["flood"])):
                self.say(sid, "word ")
                await asyncio.sleep(0)  # as the SDK's awaited sends: others get a turn
        elif "hang" in step:
            if step.get("ignore_cancel"):
                await asyncio.get_running_loop().create_future()  # never done
            while sid not in self.cancelled:
                await self.cancel_events.setdefault(sid, asyncio.Event()).wait()
            return "cancelled"
        elif "crash" in step:
            sys.stdout.flush()
            os._exit(int(step["crash"]))
        elif "garbage" in step:
            self.write_line((step["garbage"] + "\n").encode())
        elif "stop" in step:
            return str(step["stop"])
        return None


def _fault(kind: str) -> None:
    if kind == "exit":
        sys.stderr.write("fake agent: exiting at once as scripted\n")
        sys.exit(2)
    if kind == "garbage":
        for _ in range(3):
            sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
    threading.Event().wait()  # silent: never answer


def main() -> None:
    with open(sys.argv[1]) as fh:
        script = json.load(fh)
    log = sys.argv[2] if len(sys.argv) > 2 else None
    fault = script.get("_startup")
    if fault:
        _fault(fault)
        return
    asyncio.run(ScriptedAgent(script, log).serve())


if __name__ == "__main__":
    main()
