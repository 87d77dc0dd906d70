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
``session/load``; ``"_mcp": {"http": true, "sse": false}`` is its ``mcpCapabilities``;
``"_images": true`` offers ``promptCapabilities.image`` (image blocks are logged).
Every request received is appended to LOG as one JSON line (sessions with the
``mcpServers`` they were given).

It speaks ACP's wire protocol itself, with the standard library only:
JSON-RPC 2.0, one JSON object per line over stdin/stdout; the main thread reads
stdin and each request is answered in a thread of its own (so a prompt that
hangs still lets ``session/cancel`` in, and a prompt can wait for the client's
answer to its permission or fs request). So it starts fast: importing the
official SDK (``agent-client-protocol``, ``import acp``) costs ~0.7 s of CPU
for its pydantic schema on every spawn, and even asyncio ~50 ms.
The SDK is what vikingbot's own side of the connection uses; the method names,
field names and framing here are the ones it sends and expects. A request for
any other method is answered with -32601 "Method not found"; a notification
gets no reply.
"""

from __future__ import annotations

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


class Pending:
    """One request of ours waiting for the client's answer."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.answer: dict[str, Any] = {}

    def wait(self) -> Any:
        self.done.wait()
        if "error" in self.answer:
            err = self.answer.get("error") or {}
            code, message = err.get("code", INTERNAL_ERROR), err.get("message", "Error")
            raise RpcError(code, message, err.get("data"))
        return self.answer.get("result")


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
        self.lock = threading.Lock()  # whole lines on stdout; request ids
        self.log_lock = threading.Lock()  # whole lines in the log
        self.next_id = 0
        self.pending: dict[Any, Pending] = {}
        self.cancels: dict[str, threading.Event] = {}
        self.requests = {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/prompt": self.prompt,
        }

    # ----------------------------------------------------------- the wire

    def write_line(self, line: bytes) -> None:
        with self.lock:
            try:
                self.out.write(line)
                self.out.flush()
            except OSError:  # the client is gone (its end of stdout closed)
                os._exit(0)

    def send(self, message: dict[str, Any]) -> None:
        self.write_line((json.dumps(message, separators=(",", ":")) + "\n").encode())

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: dict[str, Any]) -> Any:
        """Ask the client and wait; its error answer is raised as an ``RpcError``."""
        waiter = Pending()
        with self.lock:
            rid = self.next_id
            self.next_id += 1
            self.pending[rid] = waiter
        try:
            self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            return waiter.wait()
        finally:
            self.pending.pop(rid, None)

    def serve(self) -> None:
        """Read stdin line by line until it closes, then exit (as the SDK's agent does)."""
        parts: list[bytes] = []
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
                for line in lines:
                    self.received(line)
            if rest:
                parts.append(rest)
        if parts:
            self.received(b"".join(parts))
        self.exit(0)  # requests still running end with us

    def exit(self, status: int) -> None:
        """End the process at once, but not in the middle of another thread's line."""
        with self.log_lock, self.lock:
            self.out.flush()
            os._exit(status)

    def received(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError:
            sys.stderr.write(f"fake agent: not JSON, ignored: {line[:200]!r}\n")
            return
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if method is None:  # an answer to one of ours
            waiter = self.pending.get(message.get("id"))
            if waiter is not None and not waiter.done.is_set():
                waiter.answer = message
                waiter.done.set()
        elif "id" in message:
            threading.Thread(target=self.answer, args=(message,), daemon=True).start()
        elif method == "session/cancel":  # the only notification an agent takes
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
                self.cancel(params["sessionId"])

    def answer(self, message: dict[str, Any]) -> None:
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
            reply["result"] = handler(params)
        except RpcError as exc:
            reply["error"] = exc.to_obj()
        except Exception as exc:
            reply["error"] = RpcError(
                INTERNAL_ERROR, "Internal error", {"details": str(exc)}
            ).to_obj()
        self.send(reply)

    # ----------------------------------------------------------- the agent

    def log(self, kind: str, **data: Any) -> None:
        if self.log_path is not None:
            line = json.dumps({"kind": kind, "pid": os.getpid(), **data}) + "\n"
            with self.log_lock, open(self.log_path, "a") as fh:
                fh.write(line)

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        [protocol_version] = _need(params, "protocolVersion")
        self.log("initialize", protocol_version=protocol_version)
        caps: dict[str, Any] = {"loadSession": bool(self.script.get("_load_session"))}
        if isinstance(self.script.get("_mcp"), dict):
            caps["mcpCapabilities"] = self.script["_mcp"]
        if self.script.get("_images"):
            caps["promptCapabilities"] = {"image": True}
        return {"protocolVersion": PROTOCOL_VERSION, "agentCapabilities": caps}

    def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd, servers = _need(params, "cwd", "mcpServers")
        sid = _new_id(6)
        self.log("new_session", cwd=cwd, session_id=sid, mcp_servers=servers)
        return {"sessionId": sid}

    def load_session(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd, session_id, servers = _need(params, "cwd", "sessionId", "mcpServers")
        self.log("load_session", cwd=cwd, session_id=session_id, mcp_servers=servers)
        return {}

    def cancelled(self, session_id: str) -> threading.Event:
        """Set once the session is cancelled (and stays set, as the old fake's set)."""
        return self.cancels.setdefault(session_id, threading.Event())

    def cancel(self, session_id: str) -> None:
        self.log("cancel", session_id=session_id)
        self.cancelled(session_id).set()

    def prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id, blocks = _need(params, "sessionId", "prompt")
        texts = [
            b.get("text", "") if isinstance(b, dict) and b.get("type") == "text" else ""
            for b in blocks
        ]
        images = [
            {"mimeType": b.get("mimeType"), "chars": len(str(b.get("data", "")))}
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "image"
        ]
        self.log("prompt", session_id=session_id, texts=texts, images=images)
        steps = self.script.get(texts[-1] if texts else "", self.script.get("*", []))
        stop: Any = "end_turn"
        for step in steps:
            result = self.step(session_id, step)
            if result is not None:
                stop = result
                break
        return {"stopReason": stop}

    def update(self, sid: str, update: dict[str, Any]) -> None:
        self.notify("session/update", {"sessionId": sid, "update": update})

    def say(self, sid: str, text: str) -> None:
        self.update(sid, _text_update(text))

    def step(self, sid: str, step: dict[str, Any]) -> str | None:
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
            resp = self.request(
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
                got = self.request("fs/read_text_file", {"sessionId": sid, "path": step["read"]})
                if not isinstance(got, dict) or not isinstance(got.get("content"), str):
                    raise ValueError(f"fs/read_text_file answered without content: {got!r}")
                self.say(sid, f"read: {got['content']}")
            except Exception as exc:
                self.say(sid, f"read error: {exc} {getattr(exc, 'data', '')}")
        elif "write" in step:
            w = step["write"]
            try:
                params = {"sessionId": sid, "path": w["path"], "content": w["content"]}
                self.request("fs/write_text_file", params)
                self.say(sid, "written")
            except Exception as exc:
                self.say(sid, f"write error: {exc} {getattr(exc, 'data', '')}")
        elif "flood" in step:
            for _ in range(int(step["flood"])):
                self.say(sid, "word ")
        elif "hang" in step:
            if step.get("ignore_cancel"):
                threading.Event().wait()  # never set
            self.cancelled(sid).wait()
            return "cancelled"
        elif "crash" in step:
            self.exit(int(step["crash"]))
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
    ScriptedAgent(script, log).serve()


if __name__ == "__main__":
    main()
