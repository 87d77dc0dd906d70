"""Live replies on Discord (discord.py against the fake REST API and gateway): the reply
is posted once and edited in place (``PATCH .../messages/{id}``) while the model writes,
under Discord's rate, and its last edit is exactly the reply."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.fake_discord import FakeDiscord
from tests.support.steering_rig import stack_config, steering_stack
from tests.support.trickle_model import TrickleModel
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

ALICE, GENERAL = "111111111111111111", "444444444444444444"
OWNER = "discord:999999999999999999"


def section(fake: FakeDiscord, api: str) -> dict[str, object]:
    return {"enabled": True, "apiBase": api, "token": fake.token, "allowFrom": [GENERAL],
            "streamReplies": True}  # fmt: skip


async def until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        await asyncio.sleep(0.02)


async def test_a_streamed_discord_reply_is_one_message_edited_in_place(tmp_path: Path) -> None:
    fake = FakeDiscord()
    words = [f"word{i} " for i in range(40)] + ["**done**"]
    final = "".join(words)  # Discord renders Markdown itself
    with fake.serve() as api, TrickleModel.start(words, every_s=0.04) as model:  # 1.6 s
        config = stack_config(model, owner=OWNER, channels={"discord": section(fake, api)})
        async with steering_stack(tmp_path, config):
            await fake.wait_ready()
            fake.push_message(channel_id=GENERAL, user_id=ALICE, text="write a lot")
            await until(lambda: bool(fake.sent) and fake.sent[0]["content"] == final, "final")
            assert len(fake.sent) == fake.posts == 1  # one message: the preview became the reply
            drafts = [e["content"] for e in fake.edits[:-1]]
            assert drafts and all(final.startswith(d) for d in drafts)
            assert 2 <= len(fake.edits) <= 3  # paced: one edit every 1.5 s
            gaps = [b - a for a, b in itertools.pairwise(e["at"] for e in fake.edits[:-1])]
            assert all(g >= 1.3 for g in gaps), gaps
            assert fake.refused_edits == 0


async def test_a_deleted_discord_preview_gets_the_reply_posted_anew(tmp_path: Path) -> None:
    fake = FakeDiscord()
    with fake.serve() as api, FakeOpenAI.start() as model:
        model.script([tool_call("list_dir", {"path": "."}), reply("Three files.")])
        config = stack_config(model, owner=OWNER, channels={"discord": section(fake, api)})
        async with steering_stack(tmp_path, config):
            await fake.wait_ready()
            fake.all_deleted = True  # the preview is deleted as soon as it is there
            fake.push_message(channel_id=GENERAL, user_id=ALICE, text="what is here?")
            preview, answer = await fake.wait_sent(2)
            assert preview["content"] == "⏳ list_dir…"
            assert answer["content"] == "Three files."  # not lost with its preview
            assert fake.edits == []
