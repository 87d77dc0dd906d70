"""Drive nanobot (nanobot-ai 0.3.5, its own venv) through the long-chat bench (issue 43).

Run with the peer venv's python:
``python nanobot_long_chat.py HOME BASE_URL TURNS CONTEXT_TOKENS``. Writes a config
(the ``custom`` OpenAI-compatible provider at BASE_URL, ``contextWindowTokens`` as
given, Dream on), then through nanobot's own SDK (``Nanobot.run``) sends the turns
the bench prints on stdin, one line each, in one session. nanobot's consolidation
runs as it does on its own (the token threshold). Afterwards its Dream pass (the
steps of its ``/dream`` command: ``build_dream_prompt``, then an agent run with the
Dream tools) runs three times: once for the chat's history, once on a quiet day,
once after 50 new history entries. Before each phase it prints ``@@ phase NAME`` and
waits for a line on stdin, so the bench can count the fake model's requests per phase.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path


def config(home: Path, base_url: str, context: int) -> Path:
    workspace = home / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    path = home / "nanobot" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "agents": {
                    "defaults": {
                        "workspace": str(workspace),
                        "model": "fake-model",
                        "provider": "custom",
                        "contextWindowTokens": context,
                        "maxTokens": 1024,
                        "timezone": "UTC",
                    }
                },
                "providers": {"custom": {"apiKey": "sk-test", "apiBase": base_url}},
            }
        )
    )
    return path


def phase(name: str) -> None:
    print(f"@@ phase {name}", flush=True)
    sys.stdin.readline()


async def dream(bot: object) -> str:
    from nanobot.agent.memory import MemoryStore

    loop = bot._loop  # type: ignore[attr-defined]
    store = loop.context.memory
    result = store.build_dream_prompt()
    if result is None:
        return "no input"
    prompt, cursor = result

    async def silent(*_a: object, **_k: object) -> None:
        return None

    resp = await loop.process_direct(
        prompt,
        session_key=MemoryStore.dream_session_key(),
        ephemeral=True,
        tools=store.build_dream_tools(),
        on_progress=silent,
        runtime=loop.dream_runtime(),
    )
    if MemoryStore.dream_run_completed(resp):
        store.set_last_dream_cursor(cursor)
    return "ran"


async def main() -> None:
    home, base_url, turns, context = (
        Path(sys.argv[1]),
        sys.argv[2],
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    os.environ["HOME"] = str(home)
    from nanobot.nanobot import Nanobot

    bot = Nanobot.from_config(config(home, base_url, context))
    phase("chat")
    for n in range(1, turns + 1):
        text = sys.stdin.readline().rstrip("\n")
        result = await bot.run(text, session_key="cli:bench")
        print(f"@@ turn {n} {len(result.content or '')}", flush=True)
    phase("dream-after-chat")
    print(f"@@ dream {await dream(bot)}", flush=True)
    phase("dream-quiet-day")
    print(f"@@ dream {await dream(bot)}", flush=True)
    for i in range(50):
        bot.memory.append_history(f"user: new fact number {i} MARK-{1000 + i}")
    phase("dream-50-new")
    print(f"@@ dream {await dream(bot)}", flush=True)
    phase("done")


if __name__ == "__main__":
    asyncio.run(main())
