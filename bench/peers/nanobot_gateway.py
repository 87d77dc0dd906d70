"""Start nanobot's own gateway (nanobot-ai 0.3.5 from PyPI), in its own venv, for the
turn-cost bench (bench/heartbeat_turn_cost.py).

Run with the peer venv's python: ``python nanobot_gateway.py HOME BASE_URL INTERVAL_S``.
Writes a config (the ``custom`` OpenAI-compatible provider at BASE_URL, the local
websocket channel, the heartbeat every INTERVAL_S seconds), makes one websocket chat
session with nanobot's own ``SessionManager`` (the heartbeat sends to a session of an
enabled channel), prints ``@@ workspace PATH`` and then runs ``nanobot gateway`` in this
process; the bench writes HEARTBEAT.md and stops the process when it has its turns.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    home, base_url, interval = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    os.environ["HOME"] = str(home)
    workspace = home / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    config = home / "nanobot" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        json.dumps(
            {
                "agents": {
                    "defaults": {
                        "workspace": str(workspace),
                        "model": "fake-model",
                        "provider": "custom",
                    }
                },
                "providers": {"custom": {"apiKey": "sk-test", "apiBase": base_url}},
                "channels": {
                    "websocket": {"enabled": True, "host": "127.0.0.1", "port": free_port()}
                },
                "gateway": {
                    "host": "127.0.0.1",
                    "port": free_port(),
                    "heartbeat": {"enabled": True, "intervalS": interval},
                },
            }
        )
    )
    from nanobot.config.loader import set_config_path
    from nanobot.session.manager import SessionManager

    set_config_path(config)
    sessions = SessionManager(workspace)
    session = sessions.get_or_create("websocket:bench")
    session.add_message("user", "hello")
    sessions.save(session)
    print(f"@@ workspace {workspace}", flush=True)
    from nanobot.cli.commands import app

    sys.argv = ["nanobot", "gateway", "-c", str(config), "-w", str(workspace), "--foreground"]
    app()


if __name__ == "__main__":
    main()
