"""Chat commands through Telegram (python-telegram-bot against the loopback fake Bot API):
model calls made by 100 commands (issue 44, target 0), beside the same 100 lines sent
to a gateway without command handling (each one a model call, as before issue 44), and
the time from a command's arrival at the fake API to its answer there.

    uv run --all-extras --dev python bench/chat_commands.py [--commands 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from loguru import logger

from tests.support.fake_telegram import FakeTelegram
from tests.support.steering_rig import stack_config, steering_stack
from vikingbot.testing.fake_openai import FakeOpenAI, reply

OWNER = 4242
LINES = ["/status", "/usage", "/model fake-large", "/model default", "/help", "/new"]


async def run(n: int, *, steering: bool) -> tuple[int, list[float]]:
    fake = FakeTelegram(max_poll_s=0.2)
    with fake.serve() as api, FakeOpenAI.start(default=reply("from the model")) as model:
        section = {"enabled": True, "token": fake.token, "apiBase": api}
        config = stack_config(model, owner=f"telegram:{OWNER}", channels={"telegram": section})
        with tempfile.TemporaryDirectory() as tmp:
            async with steering_stack(Path(tmp), config) as s:
                if not steering:
                    s.dispatcher.steering = None
                took: list[float] = []
                for i in range(n):
                    t0 = time.perf_counter()
                    fake.push_text(chat_id=OWNER, user_id=OWNER, text=LINES[i % len(LINES)])
                    await fake.wait_sent(i + 1, timeout=60)
                    took.append(time.perf_counter() - t0)
                return len(model.requests), took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commands", type=int, default=100)
    args = parser.parse_args()
    logger.remove()
    n = args.commands
    calls, took = asyncio.run(run(n, steering=True))
    base_calls, base_took = asyncio.run(run(n, steering=False))
    print(f"{n} commands through Telegram ({', '.join(LINES)} in turn)")
    print(f"  model calls, with commands (issue 44):     {calls}   (target 0)")
    print(f"  model calls, baseline (text to the model): {base_calls}")
    for label, t in (("with commands", took), ("baseline", base_took)):
        q = statistics.quantiles(t, n=20)
        print(
            f"  message in -> answer sent, {label:13}: median {statistics.median(t) * 1000:.0f} ms,"
            f" p95 {q[18] * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
