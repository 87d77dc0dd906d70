"""An approval asked in a Matrix room, through a real Synapse (issue 44): from the
person's message to the question in the room, and from their "yes" to the tool's
result applied ("Approved: …" in the room, the file written), as the person's own
client sees them (the homeserver's /messages, polled every 20 ms).

Needs Synapse where tests/support/synapse.py looks (.ci/run installs it).

    uv run --all-extras --dev python bench/chat_approval_matrix.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loguru import logger

from tests.support.steering_rig import stack_config, steering_stack
from tests.support.synapse import start
from vikingbot.testing.fake_openai import FakeOpenAI, Step, reply, tool_call


async def until(check: Callable[[], Any], timeout: float = 60.0) -> float:
    deadline = time.perf_counter() + timeout
    while not await asyncio.to_thread(check):
        if time.perf_counter() > deadline:
            raise SystemExit("timed out waiting for the room")
        await asyncio.sleep(0.02)
    return time.perf_counter()


async def run(rounds: int, root: Path) -> tuple[list[float], list[float]]:
    hs = start(root / "synapse")
    try:
        admin, bot, alice = hs.register(admin=True), hs.register(), hs.register()
        hs.unlimited(admin, bot)
        hs.unlimited(admin, alice)
        matrix = {
            "enabled": True,
            "homeserver": hs.url,
            "accessToken": bot.token,
            "allowFrom": [alice.user_id],
        }
        steps: list[Step | str] = []
        for i in range(rounds):
            steps += [tool_call("write_file", {"path": f"n{i}.txt", "content": "x"}), reply("ok")]
        with FakeOpenAI.start() as model:
            model.script(steps)
            config = stack_config(model, owner="telegram:1", channels={"matrix": matrix})
            async with steering_stack(root / "gw", config) as s:
                room = hs.create_room(alice, invite=[bot.user_id], direct=True)

                def mine() -> list[str]:
                    return hs.texts(alice, room, sender=bot.user_id)

                path = f"/_matrix/client/v3/rooms/{room}/joined_members"
                await until(lambda: bot.user_id in hs.call(alice, "GET", path)["joined"])
                asked, applied = [], []
                for i in range(rounds):
                    seen = len(mine())
                    t0 = time.perf_counter()
                    await asyncio.to_thread(hs.say, alice, room, f"write note {i}")
                    t1 = await until(lambda n=seen: len(mine()) > n)
                    asked.append(t1 - t0)
                    await asyncio.to_thread(hs.say, alice, room, "yes")
                    done = s.home.paths.workspace_root / "shared" / f"n{i}.txt"
                    t2 = await until(lambda n=seen, f=done: len(mine()) > n + 1 and f.exists())
                    applied.append(t2 - t1)
                return asked, applied
    finally:
        hs.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    logger.remove()
    with tempfile.TemporaryDirectory() as tmp:
        asked, applied = asyncio.run(run(args.rounds, Path(tmp)))
    print(f"approval round trip through a real Synapse, {args.rounds} rounds (DM room)")
    print(
        f"  message sent -> question visible: median {statistics.median(asked):.2f} s, "
        f"max {max(asked):.2f} s"
    )
    print(
        f"  'yes' sent -> 'Approved' visible and tool applied: median "
        f"{statistics.median(applied):.2f} s, max {max(applied):.2f} s"
    )


if __name__ == "__main__":
    main()
