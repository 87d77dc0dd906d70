"""Feishu with two real gateway processes on one home and one PostgreSQL schema.

Feishu posts events to the request URL; behind a load balancer (or after the first
gateway failed to acknowledge in time) its redelivery of an event can reach the
other gateway. The event is still answered once: the model is asked once and one
message is sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.databases import SharedDb
from tests.support.fake_feishu import FakeFeishu
from tests.support.gateway_proc import GatewayProcess, both_started, write_shared_home
from tests.support.home import poll
from vikingbot.testing.fake_openai import FakeOpenAI

ALICE, DM = "ou_alice", "oc_dm_alice"


@pytest.fixture
def feishu_home(
    pg_schema: SharedDb, tmp_path: Path
) -> Iterator[tuple[Path, FakeFeishu, FakeOpenAI]]:
    feishu = FakeFeishu()
    with FakeOpenAI.start() as llm, feishu.serve() as domain:
        home = write_shared_home(
            tmp_path / "home",
            pg_schema.config_url,
            llm_url=llm.base_url,
            channels={
                "feishu": {
                    "enabled": True,
                    "appId": feishu.app_id,
                    "appSecret": feishu.app_secret,
                    "verificationToken": feishu.verification_token,
                    "domain": domain,
                    "allowFrom": [ALICE],
                }
            },
            heartbeat={"enabled": False},  # only chat turns reach the model here
        )
        yield home, feishu, llm


def deliver(feishu: FakeFeishu, gw: GatewayProcess, event: dict[str, Any]) -> None:
    """Feishu posts ``event`` to ``gw``'s request URL; the gateway takes it (200)."""
    answer = asyncio.run(feishu.push(f"{gw.base_url}/feishu/events", event))
    assert answer.status_code == 200, answer.text


def test_an_event_delivered_to_both_gateways_is_answered_once(
    feishu_home: tuple[Path, FakeFeishu, FakeOpenAI],
) -> None:
    home, feishu, llm = feishu_home
    llm.script(["Sunny all day.", "Bring an umbrella."])
    weather = feishu.event(chat_id=DM, open_id=ALICE, text="weather today?")
    with both_started(home) as (a, b):
        deliver(feishu, a, weather)
        deliver(feishu, b, weather)  # the redelivery (same event id) reaches the other one
        poll(lambda: feishu.sent, "the answer", 30)
        deliver(feishu, b, feishu.event(chat_id=DM, open_id=ALICE, text="and tomorrow?"))
        poll(lambda: len(feishu.sent) >= 2, "the second answer", 30)
    # both gateways have exited: whatever either would ever send or ask has happened
    assert [r.last_user_text for r in llm.requests] == ["weather today?", "and tomorrow?"]
    sent = [(m["chat_id"], json.loads(m["body"]["content"])) for m in feishu.sent]
    assert [(chat, post["zh_cn"]["content"][0][0]["text"]) for chat, post in sent] == [
        (DM, "Sunny all day."),
        (DM, "Bring an umbrella."),
    ]
