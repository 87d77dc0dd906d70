"""Drive OpenViking's vikingbot (0.1.3 from PyPI) heartbeat, in its own venv, for the
turn-cost bench (bench/heartbeat_turn_cost.py).

Run with the peer venv's python: ``python openviking_turns.py HOME BASE_URL OV_URL``.
Builds the gateway's parts with vikingbot's own functions (``prepare_cron``,
``prepare_agent_loop``, ``prepare_heartbeat``: what ``vikingbot gateway`` wires), makes
one chat session, then runs one heartbeat tick (``HeartbeatService._tick``, what its
interval loop calls) per line read on stdin, printing ``tick N`` after each.
HEARTBEAT.md is the bench's to write (its path is printed first, ``workspace PATH``).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from pathlib import Path


def main() -> None:
    home, base_url, ov_url = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    conf = home / "ov.conf"
    conf.write_text(
        json.dumps(
            {
                "storage": {"workspace": str(home / "data")},
                "server": {"url": ov_url},
                "bot": {
                    "agents": {
                        "model": "openai/fake-model",
                        "provider": "openai",
                        "api_key": "sk-test",
                        "api_base": base_url,
                    },
                    "ov_server": {"mode": "remote", "server_url": ov_url, "root_api_key": "k"},
                    "sandbox": {"backend": "direct", "mode": "shared"},
                    "heartbeat": {"enabled": True, "interval_seconds": 600},
                },
            }
        )
    )
    os.environ["OPENVIKING_CONFIG_FILE"] = str(conf)
    os.environ["HOME"] = str(home)
    asyncio.run(run())


async def run() -> None:
    # the peer's own package (this venv's vikingbot 0.1.3), not this repository's
    queue = importlib.import_module("vikingbot.bus.queue")
    commands = importlib.import_module("vikingbot.cli.commands")
    loader = importlib.import_module("vikingbot.config.loader")
    schema = importlib.import_module("vikingbot.config.schema")
    manager = importlib.import_module("vikingbot.session.manager")
    MessageBus, SessionKey, SessionManager = (
        queue.MessageBus,
        schema.SessionKey,
        manager.SessionManager,
    )
    _init_bot_data, ensure_config = commands._init_bot_data, loader.ensure_config
    prepare_agent_loop, prepare_cron = commands.prepare_agent_loop, commands.prepare_cron
    prepare_heartbeat = commands.prepare_heartbeat

    config = ensure_config(None)
    _init_bot_data(config)
    sessions = SessionManager(config.bot_data_path)
    bus = MessageBus()
    cron = prepare_cron(bus, quiet=True)
    agent = prepare_agent_loop(config, bus, sessions, cron, quiet=True)
    heartbeat = prepare_heartbeat(config, agent, sessions)
    key = SessionKey(type="telegram", channel_id="default", chat_id="42")
    session = sessions.get_or_create(key)
    session.add_message("user", "hello")
    await sessions.save(session)
    workspace = config.workspace_path / "shared"
    workspace.mkdir(parents=True, exist_ok=True)
    print(f"@@ workspace {workspace}", flush=True)
    n = 0
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        await heartbeat._tick()
        n += 1
        print(f"@@ tick {n}", flush=True)


if __name__ == "__main__":
    main()
