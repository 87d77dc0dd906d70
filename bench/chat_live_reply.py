"""Live replies (issue 44): seconds from the model's first token to the first visible text in
the chat, per platform, and edits per reply against the platform's limit.

The model is a loopback server streaming OpenAI chunks (tests/support/trickle_model.py,
``--words`` words, one every ``--every`` s); the gateway's chat path runs in this process
(real channels, real dispatcher). Telegram: python-telegram-bot against the loopback fake
Bot API, the chat looked at every 5 ms. Matrix: mautrix against a real Synapse, the
person's client polling /messages every 20 ms (so the Matrix figure includes up to 20 ms
of polling). The baseline is the same reply without live replies: the first text is
visible only when the whole reply is.

    uv run --all-extras --dev python bench/chat_live_reply.py [--rounds 3] [--words 60] [--every 0.05] [--no-matrix]
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

from tests.support.fake_telegram import FakeTelegram
from tests.support.steering_rig import stack_config, steering_stack
from tests.support.synapse import start
from tests.support.trickle_model import TrickleModel

OWNER = 4242


async def first_true(check: Callable[[], Any], every_s: float, timeout: float = 60.0) -> float:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        await asyncio.sleep(every_s)
    return time.monotonic()


async def telegram(
    rounds: int, words: list[str], every: float, live: bool
) -> tuple[list[float], list[int], float]:
    fake = FakeTelegram(max_poll_s=0.2)
    fake.edit_limit_per_s = 1000  # measure what we send, not the fake's flood control
    firsts, edits = [], []
    with (
        fake.serve() as api,
        TrickleModel.start(words, every) as model,
        tempfile.TemporaryDirectory() as tmp,
    ):
        section = {"enabled": True, "token": fake.token, "apiBase": api, "streamReplies": live}
        config = stack_config(model, owner=f"telegram:{OWNER}", channels={"telegram": section})
        async with steering_stack(Path(tmp), config):
            for i in range(rounds):
                n, before = len(fake.sent), len(fake.calls_of("editMessageText"))
                fake.push_text(chat_id=OWNER, user_id=OWNER, text=f"write {i}")
                seen = await first_true(lambda n=n: len(fake.sent) > n, 0.005)
                firsts.append(seen - (model.first_chunk_at[-1] if live else model.started_at[-1]))
                await first_true(lambda n=n: fake.sent[n]["text"].endswith("end"), 0.01)
                await asyncio.sleep(0.3)
                edits.append(len(fake.calls_of("editMessageText")) - before)
        return firsts, edits, len(words) * every


async def matrix(
    rounds: int, words: list[str], every: float, root: Path
) -> tuple[list[float], list[int]]:
    hs = start(root / "synapse")
    try:
        admin, bot, alice = hs.register(admin=True), hs.register(), hs.register()
        hs.unlimited(admin, alice)  # the bot keeps Synapse's default limits: the pacing must fit
        section = {
            "enabled": True,
            "homeserver": hs.url,
            "accessToken": bot.token,
            "allowFrom": [alice.user_id],
            "streamReplies": True,
        }
        firsts, edits = [], []
        with TrickleModel.start(words, every) as model:
            config = stack_config(model, owner="telegram:1", channels={"matrix": section})
            async with steering_stack(root / "gw", config):
                room = hs.create_room(alice, invite=[bot.user_id], direct=True)
                path = f"/_matrix/client/v3/rooms/{room}/joined_members"
                joined = lambda: bot.user_id in hs.call(alice, "GET", path)["joined"]  # noqa: E731
                await first_true(joined, 0.05)

                def mine() -> list[dict[str, Any]]:
                    return [
                        e for e in hs.messages(alice, room, limit=200) if e["sender"] == bot.user_id
                    ]

                for i in range(rounds):
                    before = mine()
                    hs.say(alice, room, f"write {i}")
                    seen = await first_true(lambda b=len(before): len(mine()) > b, 0.02)
                    firsts.append(seen - model.first_chunk_at[-1])
                    await first_true(
                        lambda: "end" in str(mine()[-1]["content"].get("m.new_content", {})), 0.05
                    )
                    news = mine()[len(before) :]
                    edits.append(sum(1 for e in news if "m.new_content" in e["content"]))
        return firsts, edits
    finally:
        hs.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--words", type=int, default=60)
    parser.add_argument("--every", type=float, default=0.05)
    parser.add_argument("--no-matrix", action="store_true")
    args = parser.parse_args()
    logger.remove()
    words = [f"w{i} " for i in range(args.words - 1)] + ["end"]
    writing = args.words * args.every
    print(
        f"a reply of {args.words} words, one every {args.every} s ({writing:.1f} s of writing), {args.rounds} rounds"
    )
    firsts, edits, _ = asyncio.run(telegram(args.rounds, words, args.every, True))
    print(
        f"  telegram, live:     first token -> first visible text median {statistics.median(firsts):.2f} s "
        f"(max {max(firsts):.2f}); edits per reply {edits} over {writing:.1f} s "
        f"= {max(edits) / writing:.2f}/s (paced at 1/s; Telegram: about 1 message/s per chat)"
    )
    base, _, _ = asyncio.run(telegram(args.rounds, words, args.every, False))
    print(
        f"  telegram, baseline: first token -> first visible text median {statistics.median(base):.2f} s (the whole reply at once)"
    )
    if not args.no_matrix:
        with tempfile.TemporaryDirectory() as tmp:
            mf, me = asyncio.run(matrix(args.rounds, words, args.every, Path(tmp)))
        print(
            f"  matrix, live:       first token -> first visible text median {statistics.median(mf):.2f} s "
            f"(max {max(mf):.2f}); edits per reply {me} over {writing:.1f} s "
            f"= {max(me) / writing:.2f}/s (paced at 1 per 2 s; Synapse default rc_message 0.2/s, burst 10)"
        )


if __name__ == "__main__":
    main()
