"""Live replies on Feishu (lark-oapi against the fake open platform): the reply is posted
once and edited in place (``PUT /im/v1/messages/{id}``) while the model writes, under the
rate and Feishu's 20 edits a message, and its last edit is exactly the reply."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from tests.support.fake_feishu import MAX_EDITS, FakeFeishu
from tests.support.steering_rig import stack_config, steering_stack
from tests.support.trickle_model import TrickleModel
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.config.schema import Config
from vikingbot.delivery.types import OutboundMessage
from vikingbot.store import StateStore
from vikingbot.testing.server import serving

ALICE, DM = "ou_alice", "oc_dm_alice"


def section(feishu: FakeFeishu, domain: str) -> dict[str, Any]:
    return {"enabled": True, "appId": feishu.app_id, "appSecret": feishu.app_secret,
            "verificationToken": feishu.verification_token, "domain": domain,
            "allowFrom": [ALICE], "streamReplies": True}  # fmt: skip


def shown(content: Any) -> str:
    """The Markdown a post message's content shows."""
    return str(json.loads(content)["zh_cn"]["content"][0][0]["text"])


async def until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        await asyncio.sleep(0.02)


async def test_a_streamed_feishu_reply_is_one_message_edited_in_place(tmp_path: Path) -> None:
    feishu = FakeFeishu()
    words = [f"word{i} " for i in range(60)] + ["**done**"]
    final = "".join(words)  # Feishu renders the Markdown itself
    with feishu.serve() as domain, TrickleModel.start(words, every_s=0.05) as model:  # 3 s
        config = stack_config(model, owner="feishu:oc_owner",
                              channels={"feishu": section(feishu, domain)})  # fmt: skip
        async with (
            steering_stack(tmp_path, config) as s,
            serving(Starlette(routes=s.manager.routes())) as gateway,
        ):
            ask = feishu.event(chat_id=DM, open_id=ALICE, text="write a lot")
            assert (await feishu.push(f"{gateway}/feishu/events", ask)).status_code == 200
            await until(
                lambda: bool(feishu.sent) and shown(feishu.sent[0]["body"]["content"]) == final,
                "the final edit",
            )
            assert len(feishu.sent) == feishu.posts == 1  # the preview became the reply
            drafts = [shown(e["content"]) for e in feishu.edits[:-1]]
            assert drafts and all(final.startswith(d) for d in drafts)
            assert 2 <= len(feishu.edits) <= 3  # paced: one edit every 2 s
            times = [feishu.created_at[feishu.sent[0]["message_id"]]]
            times += [e["at"] for e in feishu.edits[:-1]]  # the post, then each preview edit
            gaps = [b - a for a, b in itertools.pairwise(times)]
            assert all(g >= 1.8 for g in gaps), gaps
            assert feishu.refused_edits == 0


async def test_a_long_preview_keeps_feishus_last_edit_for_the_reply_or_posts_anew(
    tmp_path: Path, _sqlite_template: Path
) -> None:
    feishu = FakeFeishu()
    feishu.chats.add(DM)
    feishu.edit_limit_per_s = 1000  # this test calls draft directly, unpaced
    shutil.copyfile(_sqlite_template, tmp_path / "state.db")
    with (
        feishu.serve() as domain,
        StateStore.open(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        channels = {"cli": {"enabled": False}, "feishu": section(feishu, domain)}
        cfg = Config.model_validate({"bot": {"channels": channels}})
        manager = ChannelManager(cfg, bus=MessageBus(), store=store)
        await manager.start()
        try:
            channel = manager.channel("feishu")
            assert channel is not None
            for n in range(MAX_EDITS + 5):  # more than Feishu lets a message be edited
                await channel.draft(DM, None, f"so far {n}")
            await channel.send(OutboundMessage("feishu", DM, "the **reply**", dedupe_key="k1"))
            (message,) = feishu.sent
            assert shown(message["body"]["content"]) == "the **reply**"
            assert len(message["was"]) == MAX_EDITS  # 19 previews, then the reply
            assert shown(message["was"][-1]) == f"so far {MAX_EDITS - 1}"

            feishu.recalled = True  # the next preview is recalled by someone meanwhile
            await channel.draft(DM, None, "a second turn")
            await channel.send(OutboundMessage("feishu", DM, "second reply", dedupe_key="k2"))
            assert [shown(m["body"]["content"]) for m in feishu.sent[1:]] == [
                "a second turn",
                "second reply",
            ]
        finally:
            await manager.stop()
