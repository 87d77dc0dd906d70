"""Steering from Feishu (lark-oapi against the fake open platform): an approval question
is an interactive card with Allow / Deny buttons; a press comes back as a card action
callback on /feishu/events, and only the person the turn serves may answer."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.applications import Starlette

from tests.support.fake_feishu import FakeFeishu
from tests.support.steering_rig import stack_config, steering_stack
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call
from vikingbot.testing.server import serving

ALICE, MALLORY = "ou_alice", "ou_mallory"
GROUP = "oc_team"


def said(message: dict[str, object]) -> str:
    body = message["body"]
    assert isinstance(body, dict)
    return str(body["content"])


async def test_an_approval_is_a_card_and_a_third_users_press_is_refused(tmp_path: Path) -> None:
    feishu = FakeFeishu()
    with feishu.serve() as domain, FakeOpenAI.start() as model:
        model.script(
            [tool_call("write_file", {"path": "f.txt", "content": "hi"}), reply("written")]
        )
        section = {
            "enabled": True,
            "appId": feishu.app_id,
            "appSecret": feishu.app_secret,
            "verificationToken": feishu.verification_token,
            "domain": domain,
            "allowFrom": [GROUP],
            "groupMessages": "all",
        }
        config = stack_config(model, owner="feishu:oc_owner", channels={"feishu": section})
        async with (
            steering_stack(tmp_path, config) as s,
            serving(Starlette(routes=s.manager.routes())) as gateway,
        ):
            url = f"{gateway}/feishu/events"
            ask = feishu.event(chat_id=GROUP, open_id=ALICE, text="write it", chat_type="group")
            assert (await feishu.push(url, ask)).status_code == 200
            (question,) = await feishu.wait_sent(1)
            assert question["msg_type"] == "interactive"
            card = json.loads(said(question))
            assert card["elements"][0]["text"]["content"].startswith("Allow write_file?")
            buttons = card["elements"][1]["actions"]
            assert [(b["text"]["content"], b["type"]) for b in buttons] == [
                ("Allow", "primary"),
                ("Deny", "danger"),
            ]
            allow = buttons[0]["value"]

            press = feishu.card_press(message=question, open_id=MALLORY, value=allow)
            assert (await feishu.push(url, press)).status_code == 200
            sent = await feishu.wait_sent(2)
            assert "Only the person this turn answers" in said(sent[1])
            press = feishu.card_press(message=question, open_id=ALICE, value=allow)
            answer = await feishu.push(url, press)
            assert answer.status_code == 200
            await feishu.push(url, press)  # delivered again: answered once
            sent = await feishu.wait_sent(4)
            assert "Approved: write_file" in said(sent[2]) and "written" in said(sent[3])
            assert (s.home.paths.workspace_root / "shared" / "f.txt").read_text() == "hi"
            forged = feishu.card_press(message=question, open_id=ALICE, value=allow)
            forged["header"]["token"] = "wrong"
            assert (await feishu.push(url, forged)).status_code == 401
            refusals = s.audit("approval.refuse")
            assert [(e["actor"], e["outcome"]) for e in refusals] == [
                (f"chat:{MALLORY}", "refused")
            ]
            assert s.audit("approval.answer")[0]["actor"] == f"chat:{ALICE}"
        assert len(feishu.sent) == 4
