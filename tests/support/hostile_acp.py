"""A hostile ACP agent behind a real gateway, and a calm chat beside it (issue 38).

The agent is ``vikingbot.testing.fake_acp_agent`` (a stdlib JSON-RPC process
speaking ACP over stdio) with a script whose prompts are the misbehaviours in
``MODES``; the prompt ``hello`` is the calm chat (it answers ``hi`` at once).
``HostileGateway`` writes the home, starts ``vikingbot gateway`` as a child
process, and sends chats and heartbeat runs through the control API, so each
mode meets the same code a user's gateway runs. Shared by
``tests/gateway/test_hostile_agent.py`` and ``bench/hostile_agent.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.gateway_proc import GatewayProcess

CALM = "hello"
CALM_SESSION = "webhook:default:calm"  # not a cli session: those skip the heartbeat
PIPES = 10  # more FIFO reads than asyncio's default pool has threads on a small machine


@dataclass(frozen=True)
class Permission:
    """One permission request the agent makes, and whether the default policy allows it."""

    kind: str
    title: str
    allowed: bool


# Unattended, under the default bot.heartbeat.safe_tools (read-only tools and message):
MISLABELLED = [
    Permission("delete", "read_file", False),
    Permission("execute", "message", False),
    Permission("execute", "list_dir", False),
    Permission("read", "exec", False),  # a title naming a stricter tool narrows
    Permission("edit", "grep", False),
    Permission("other", "read_file", False),
    Permission("fetch", "read_file", False),
    Permission("read", "Look at notes.md", True),  # the honest ones still pass
    Permission("search", "Find TODOs", True),
]


def modes(workspace: Path, flood: int) -> dict[str, list[dict[str, Any]]]:
    """The script: each chat prompt's misbehaviour (the workspace holds the pipes)."""
    pipes = [{"read": str(workspace / f"pipe{i}")} for i in range(PIPES)]
    return {
        "fifo": [*pipes, {"text": "done"}],
        "device": [
            {"read": str(workspace / "zero")},  # a symlink to /dev/zero
            {"read": "/dev/zero"},
            {"read": str(workspace / "sock")},  # a socket
            {"text": "done"},
        ],
        "flood": [{"flood": flood}],
        "garbage": [{"text": "partial"}, {"garbage": "<html>not json</html>"}, {"hang": True}],
        "hang": [{"hang": True, "ignore_cancel": True}],
    }


def script(workspace: Path, flood: int) -> dict[str, Any]:
    permissions = [{"permission": {"title": p.title, "kind": p.kind}} for p in MISLABELLED]
    return {
        CALM: [{"text": "hi"}],
        **modes(workspace, flood),
        "*": [*permissions, {"text": "HEARTBEAT_OK"}],  # the heartbeat's prompt
    }


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    seconds: float


@dataclass
class HostileGateway:
    """A home whose agent is the hostile script, and the gateway serving it."""

    root: Path
    turn_timeout_s: float = 3.0
    flood: int = 2000  # updates; each costs the SDK ~0.2 ms, and the calm reply queues behind
    gw: GatewayProcess | None = None
    sockets: list[Any] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def workspace(self) -> Path:
        return self.home / "data" / "workspace" / "shared"

    @property
    def agent_log(self) -> Path:
        return self.root / "agent.jsonl"

    def prepare(self) -> None:
        import socket

        self.workspace.mkdir(parents=True, exist_ok=True)
        for i in range(PIPES):
            os.mkfifo(self.workspace / f"pipe{i}")
        (self.workspace / "zero").symlink_to("/dev/zero")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(self.workspace / "sock"))
        self.sockets.append(sock)
        (self.workspace / "notes.md").write_text("notes\n")
        (self.workspace / "HEARTBEAT.md").write_text("## Active Tasks\n\n- Check my notes\n")
        (self.root / "script.json").write_text(json.dumps(script(self.workspace, self.flood)))
        acp = {
            "command": sys.executable,
            "args": ["-m", "vikingbot.testing.fake_acp_agent", str(self.root / "script.json"),
                     str(self.agent_log)],
            "startupTimeoutS": 20,
        }  # fmt: skip
        config = {
            "bot": {
                "agents": {"loop": "acp", "acp": acp, "turnTimeoutS": self.turn_timeout_s},
                "channels": {"cli": {"enabled": False}},
                "heartbeat": {"timezone": "UTC", "intervalSeconds": 86400},
            }
        }
        (self.home / "config.json").write_text(json.dumps(config))

    def start(self) -> HostileGateway:
        self.prepare()
        self.gw = GatewayProcess(self.home, fork=False, start_timeout_s=60).start()
        return self

    def stop(self) -> None:
        if self.gw is not None and self.gw.proc is not None and self.gw.proc.poll() is None:
            self.gw.stop()
        for sock in self.sockets:
            sock.close()

    # --------------------------------------------------------------- requests

    def post(self, path: str, body: dict[str, Any], timeout: float = 60) -> Answer:
        assert self.gw is not None
        secret = (self.home / "run" / "control.secret").read_text().strip()
        req = urllib.request.Request(
            self.gw.base_url + path,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
            method="POST",
        )
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        return Answer(status, json.loads(raw or b"{}"), time.monotonic() - t0)

    def chat(self, text: str, session: str) -> Answer:
        return self.post("/api/v1/chat", {"text": text, "session": session})

    def prompts_seen(self, text: str) -> int:
        if not self.agent_log.exists():
            return 0
        rows = [json.loads(x) for x in self.agent_log.read_text().splitlines() if x]
        return sum(1 for r in rows if r.get("kind") == "prompt" and r["texts"][-1:] == [text])

    def calm_beside(self, mode: str) -> tuple[Answer, Answer]:
        """Start ``mode`` in one chat; once the agent has its prompt, time a calm chat."""
        seen = self.prompts_seen(mode)
        done: dict[str, Answer] = {}
        hostile = threading.Thread(
            target=lambda: done.setdefault("hostile", self.chat(mode, f"cli:default:{mode}"))
        )
        hostile.start()
        deadline = time.monotonic() + 30
        while self.prompts_seen(mode) <= seen and "hostile" not in done:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the agent never got the {mode!r} prompt")
            time.sleep(0.02)
        calm = self.chat(CALM, CALM_SESSION)
        hostile.join(120)
        return done["hostile"], calm

    def heartbeat_now(self) -> Answer:
        """A forced heartbeat run (a chat first, so the shared workspace has a session; chats
        through the control API are marked to skip the heartbeat, so it is switched on)."""
        self.chat(CALM, CALM_SESSION)
        env = {**os.environ, "VIKINGBOT_HOME": str(self.home)}
        switch = [sys.executable, "-m", "vikingbot", "sessions", "heartbeat", "on", CALM_SESSION]
        subprocess.run(switch, env=env, check=True, capture_output=True, timeout=60)
        return self.post("/api/v1/heartbeat/run-now", {"force": True})

    def audit(self) -> list[dict[str, Any]]:
        from vikingbot.store.db import StateStore

        store = StateStore.open(f"sqlite:///{self.home / 'data' / 'state.db'}")
        try:
            return list(store.audit_events(limit=1000))
        finally:
            store.close()

    def wrongly_approved(self) -> int:
        """Permission requests approved although the policy does not allow them."""
        allowed = {(p.kind, p.title): p.allowed for p in MISLABELLED}
        rows = [e for e in self.audit() if e["action"] == "tool.approve"]
        return sum(
            1
            for e in rows
            if not allowed.get((e["subject"].removeprefix("acp:"), e["details"]["title"]), False)
        )
