"""Live replies on Slack (slack_sdk against the fake Web API and Socket Mode): the reply
is posted once, edited in place with ``chat.update`` while the model writes, under
Slack's edit rate, and its last edit is exactly the formatted reply."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.fake_slack import FakeSlack
from tests.support.steering_rig import stack_config, steering_stack
from tests.support.trickle_model import TrickleModel
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call


def section(slack: FakeSlack, api: str) -> dict[str, object]:
    return {
        "enabled": True,
        "botToken": slack.bot_token,
        "appToken": slack.app_token,
        "apiBase": api,
        "allowFrom": ["C0TEAM"],
        "streamReplies": True,
    }


async def until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        await asyncio.sleep(0.02)


async def test_a_streamed_slack_reply_is_one_message_updated_in_place(tmp_path: Path) -> None:
    slack = FakeSlack()
    words = [f"word{i} " for i in range(40)] + ["**done**"]
    final = "".join(words[:-1]) + "*done*"
    with slack.serve() as api, TrickleModel.start(words, every_s=0.04) as model:  # 1.6 s
        config = stack_config(model, owner="slack:D0OWNER", channels={"slack": section(slack, api)})
        async with steering_stack(tmp_path, config):
            await slack.wait_connected()
            slack.push_message(user="UALICE", channel="C0TEAM", text="write a lot")
            await until(lambda: bool(slack.posts) and slack.posts[0]["text"] == final, "final")
            (post,) = slack.posts  # one message: the preview became the reply
            assert post["metadata"]["event_type"] == "vikingbot_outbox"  # found after a crash
            drafts = [u["text"] for u in slack.updates[:-1]]
            assert drafts and all("".join(words).startswith(d) for d in drafts)  # plain, growing
            assert 2 <= len(slack.updates) <= 4  # paced: one edit every 1.2 s
            drafted = [u["at"] for u in slack.updates[:-1]]
            gaps = [b - a for a, b in itertools.pairwise(drafted)]
            assert all(g >= 1.0 for g in gaps), gaps
            assert slack.refused_updates == 0


async def test_a_slack_preview_gone_gets_the_reply_posted_anew(tmp_path: Path) -> None:
    slack = FakeSlack()
    with slack.serve() as api, FakeOpenAI.start() as model:
        model.script([tool_call("list_dir", {"path": "."}), reply("Three files.")])
        config = stack_config(model, owner="slack:D0OWNER", channels={"slack": section(slack, api)})
        async with steering_stack(tmp_path, config):
            await slack.wait_connected()
            slack.update_error = "message_not_found"  # the preview is deleted once posted
            slack.push_message(user="UALICE", channel="C0TEAM", text="what is here?")
            preview, answer = await slack.wait_posts(2)
            assert preview["text"] == "⏳ list_dir…"
            assert answer["text"] == "Three files."  # the reply is not lost with its preview
            assert answer["metadata"]["event_type"] == "vikingbot_outbox"
            assert slack.updates == []
