"""Steering from Telegram (python-telegram-bot, fake Bot API) and Slack (slack_sdk, fake
Socket Mode): commands that never reach the model, the command menu, approval questions
with buttons, pairing, live replies."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_telegram import FakeTelegram
from tests.support.steering_rig import stack_config, steering_stack
from tests.support.trickle_model import TrickleModel
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

OWNER = 4242
GROUP = -100777
ALICE, MALLORY = 7, 8


@pytest.fixture
def telegram() -> Iterator[tuple[FakeTelegram, str]]:
    # a token of its own: a client of another test (or process) that reaches this port
    # after its own fake stopped is refused, not taken for this test's bot
    fake = FakeTelegram(token=f"{secrets.randbelow(10**9) + 1}:FAKE-steering", max_poll_s=0.2)
    with fake.serve() as api_base:
        yield fake, api_base


def channels(fake: FakeTelegram, api: str, **extra: Any) -> dict[str, Any]:
    section = {"enabled": True, "token": fake.token, "apiBase": api, "allowFrom": [str(GROUP)]}
    return {"telegram": {**section, **extra}}


async def until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        await asyncio.sleep(0.02)


def texts(fake: FakeTelegram) -> list[str]:
    return [m["text"] for m in fake.sent]


async def test_commands_answer_without_the_model_and_fill_the_menu(
    telegram: tuple[FakeTelegram, str], tmp_path: Path
) -> None:
    fake, api = telegram
    with FakeOpenAI.start(default=reply("from the model")) as model:
        config = stack_config(model, owner=f"telegram:{OWNER}", channels=channels(fake, api))
        async with steering_stack(tmp_path, config):
            menu = fake.calls_of("setMyCommands")[0]["commands"]
            names = [c["command"] for c in (json.loads(menu) if isinstance(menu, str) else menu)]
            assert {"new", "stop", "model", "status", "usage", "approve", "help"} <= set(names)

            fake.push_text(chat_id=OWNER, user_id=OWNER, text="/model fake-large")
            fake.push_text(chat_id=OWNER, user_id=OWNER, text="/model gpt-5-secret")
            fake.push_text(chat_id=OWNER, user_id=OWNER, text="/status@viking_fake_bot")
            sent = await fake.wait_sent(3)
            by_text = "\n".join(m["text"] for m in sent)
            assert "now uses fake-large" in by_text
            assert "not a model the config lists" in by_text
            assert "Model: fake-large" in by_text
            assert model.requests == []  # no command reached the model

            fake.push_text(
                chat_id=GROUP, user_id=MALLORY, text="/heartbeat pause", chat_type="group"
            )
            sent = await fake.wait_sent(4)
            assert sent[-1]["text"] == "Only the owner can use /heartbeat."

            fake.push_text(chat_id=OWNER, user_id=OWNER, text="hello")  # a turn: the chosen model
            await fake.wait_sent(5)
            assert [r.model for r in model.requests] == ["fake-large"]
            assert fake.calls_of("sendChatAction"), "no typing indicator while the turn ran"


async def test_an_approval_is_asked_with_buttons_and_only_the_asker_may_press(
    telegram: tuple[FakeTelegram, str], tmp_path: Path
) -> None:
    fake, api = telegram
    with FakeOpenAI.start() as model:
        model.script(
            [tool_call("write_file", {"path": "note.txt", "content": "hi"}), reply("written")]
        )
        config = stack_config(model, owner=f"telegram:{OWNER}", channels=channels(fake, api))
        async with steering_stack(tmp_path, config) as s:
            fake.push_text(chat_id=GROUP, user_id=ALICE, text="write a note", chat_type="group")
            question = (await fake.wait_sent(1))[0]
            assert question["text"].startswith("Allow write_file?")
            assert '"path": "note.txt"' in question["text"]
            buttons = question["reply_markup"]["inline_keyboard"][0]
            assert [b["text"] for b in buttons] == ["Allow", "Deny"]

            fake.push_press(chat_id=GROUP, user_id=MALLORY, data=buttons[0]["callback_data"])
            refused = (await fake.wait_sent(2))[1]
            assert refused["text"].startswith("Only the person this turn answers")
            fake.push_press(chat_id=GROUP, user_id=ALICE, data=buttons[0]["callback_data"])
            sent = await fake.wait_sent(4)
            assert texts(fake)[2:] == ["Approved: write_file", "written"]
            workspace = s.home.paths.workspace_root / "shared"
            assert (workspace / "note.txt").read_text() == "hi"
            assert len(fake.calls_of("answerCallbackQuery")) == 2
            refusals = s.audit("approval.refuse")
            assert [(e["actor"], e["outcome"]) for e in refusals] == [
                (f"chat:{MALLORY}", "refused")
            ]
            assert s.audit("approval.answer")[0]["actor"] == f"chat:{ALICE}"
            assert sent[-1]["chat_id"] == str(GROUP)


async def test_no_answer_in_time_denies_and_a_429_on_the_question_is_waited_out(
    telegram: tuple[FakeTelegram, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "1")  # the SDK's own switch: no deprecation warning
    fake, api = telegram
    with FakeOpenAI.start() as model:
        model.script([tool_call("exec", {"command": "rm -rf /tmp/x"}), reply("could not")])
        section = channels(fake, api, approvalTimeoutS=0.5)
        config = stack_config(model, owner=f"telegram:{OWNER}", channels=section)
        async with steering_stack(tmp_path, config) as s:
            fake.fail_next_send(429, "Too Many Requests: retry after 1", retry_after=1)
            fake.push_text(chat_id=OWNER, user_id=OWNER, text="clean up")
            sent = await fake.wait_sent(2)
            assert sent[0]["text"].startswith("Allow exec?")
            assert sent[1]["text"] == "could not"
            tool_message = model.requests[1].messages[-1]
            assert tool_message["role"] == "tool" and "declined" in tool_message["content"]
            assert s.audit("approval.timeout")[0]["outcome"] == "denied"


async def test_a_stranger_pairs_by_code_and_is_let_in_by_the_owner(
    telegram: tuple[FakeTelegram, str], tmp_path: Path
) -> None:
    fake, api = telegram
    stranger = 999
    with FakeOpenAI.start(default=reply("welcome aboard")) as model:
        section = channels(fake, api, pairing=True)
        config = stack_config(model, owner=f"telegram:{OWNER}", channels=section)
        async with steering_stack(tmp_path, config) as s:
            for n in range(4):  # the fourth attempt within the hour is not answered
                fake.push_text(chat_id=stranger, user_id=stranger, text=f"secret plan {n}")
            await until(lambda: len(s.audit("pairing.request")) == 4, "four attempts audited")
            codes = await fake.wait_sent(3)
            assert len({m["text"] for m in codes}) == 1  # the same code each time
            code = codes[0]["text"].split("pairing code: ")[1].split()[0]
            outcomes = [e["outcome"] for e in s.audit("pairing.request")]
            assert sorted(outcomes) == ["limited", "new", "same", "same"]
            assert model.requests == []  # nothing of the stranger reached the model

            fake.push_text(chat_id=OWNER, user_id=OWNER, text=f"/pair approve {code.lower()}")
            sent = await fake.wait_sent(4)
            assert (
                sent[-1]["text"]
                == f"Let telegram:{stranger} in: added to allow_from (applied now)."
            )
            saved = json.loads(s.home.paths.config_file.read_text())
            assert str(stranger) in saved["bot"]["channels"]["telegram"]["allowFrom"]

            fake.push_text(chat_id=stranger, user_id=stranger, text="hello")
            sent = await fake.wait_sent(5)
            assert sent[-1]["text"] == "welcome aboard"
            assert [r.last_user_text for r in model.requests] == ["hello"]


async def test_a_streamed_reply_is_one_message_edited_in_place_under_the_limit(
    telegram: tuple[FakeTelegram, str], tmp_path: Path
) -> None:
    fake, api = telegram
    words = [f"word{i} " for i in range(40)] + ["**done**"]
    with TrickleModel.start(words, every_s=0.04) as model:  # 1.6 s of writing
        section = channels(fake, api, streamReplies=True)
        config = stack_config(model, owner=f"telegram:{OWNER}", channels=section)
        async with steering_stack(tmp_path, config):
            fake.push_text(chat_id=OWNER, user_id=OWNER, text="write a lot")
            final = "".join(words[:-1]) + "<b>done</b>"
            await until(
                lambda: any(m["text"] == final and m["parse_mode"] == "HTML" for m in fake.sent),
                "the final edit",
            )
            assert len(fake.sent) == 1  # one message: the preview became the reply
            edits = fake.calls_of("editMessageText")
            assert 2 <= len(edits) <= 4  # paced at one a second: never the fake's 429
            assert all(e.get("parse_mode") is None for e in edits[:-1])


async def test_a_streamed_turn_with_a_tool_shows_a_tool_line_then_the_reply(
    telegram: tuple[FakeTelegram, str], tmp_path: Path
) -> None:
    fake, api = telegram
    with FakeOpenAI.start() as model:  # streamed: the tool call arrives as chunk deltas
        model.script([tool_call("list_dir", {"path": "."}), reply("Three files.")])
        section = channels(fake, api, streamReplies=True)
        config = stack_config(model, owner=f"telegram:{OWNER}", channels=section)
        async with steering_stack(tmp_path, config):
            fake.push_text(chat_id=OWNER, user_id=OWNER, text="what is here?")
            await until(
                lambda: any(
                    m["text"] == "Three files." and m["parse_mode"] == "HTML" for m in fake.sent
                ),
                "the reply",
            )
            (message,) = fake.sent
            assert message["was"][0] == "⏳ list_dir…", message
            assert all(r.body.get("stream") is True for r in model.requests)
            assert model.requests[1].messages[-1]["role"] == "tool"


async def test_slack_slash_commands_and_block_kit_buttons(tmp_path: Path) -> None:
    """Slack (slack_sdk against the fake Socket Mode server): a registered slash command is
    answered without the model; the approval question has Block Kit buttons, and a press by
    someone else than the asker is refused."""
    from tests.support.fake_slack import FakeSlack

    slack = FakeSlack()
    with slack.serve() as api, FakeOpenAI.start() as model:
        model.script([tool_call("write_file", {"path": "s.txt", "content": "s"}), reply("ok")])
        section = {
            "enabled": True,
            "botToken": slack.bot_token,
            "appToken": slack.app_token,
            "apiBase": api,
            "allowFrom": ["C0TEAM"],
        }
        config = stack_config(model, owner="slack:D0OWNER", channels={"slack": section})
        async with steering_stack(tmp_path, config):
            await slack.wait_connected()
            slack.push_slash(user="UALICE", channel="C0TEAM", command="/status")
            (status,) = await slack.wait_posts(1)
            assert status["text"].startswith("Session: slack:default:C0TEAM")
            assert model.requests == []

            slack.push_message(user="UALICE", channel="C0TEAM", text="write it")
            question = (await slack.wait_posts(2))[1]
            buttons = question["blocks"][1]["elements"]
            assert [b["text"]["text"] for b in buttons] == ["Allow", "Deny"]
            slack.push_press(user="UBOB", channel="C0TEAM", value=buttons[0]["value"])
            assert (await slack.wait_posts(3))[2]["text"].startswith("Only the person")
            slack.push_press(user="UALICE", channel="C0TEAM", value=buttons[0]["value"])
            posts = await slack.wait_posts(5)
            assert [p["text"] for p in posts[3:]] == ["Approved: write_file", "ok"]
