"""Steering from Discord (discord.py against the fake gateway and REST API): an approval
question is asked with Allow / Deny buttons (message components); a press arrives as an
interaction, is acknowledged, and only the person the turn serves may answer. The
commands are registered as application commands and one run from the menu is answered
without the model."""

from __future__ import annotations

from pathlib import Path

from tests.support.fake_discord import FakeDiscord
from tests.support.steering_rig import stack_config, steering_stack
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

ALICE, MALLORY = "111111111111111111", "222222222222222222"
GENERAL, GUILD = "444444444444444444", "555555555555555555"


async def test_buttons_for_approvals_and_the_commands_as_application_commands(
    tmp_path: Path,
) -> None:
    discord = FakeDiscord()
    discord.channels.add(GENERAL)
    with discord.serve() as api, FakeOpenAI.start() as model:
        model.script(
            [tool_call("write_file", {"path": "d.txt", "content": "hi"}), reply("written")]
        )
        section = {"enabled": True, "apiBase": api, "token": discord.token,
                   "allowFrom": [GENERAL]}  # fmt: skip
        config = stack_config(model, owner="discord:999999999999999999",
                              channels={"discord": section})  # fmt: skip
        async with steering_stack(tmp_path, config) as s:
            await discord.wait_ready()
            discord.push_message(
                channel_id=GENERAL, user_id=ALICE, text="write it", guild_id=GUILD,
                mention_bot=True,
            )  # fmt: skip
            (question,) = await discord.wait_sent(1)
            assert question["content"].startswith("Allow write_file?")
            (row,) = question["components"]
            buttons = row["components"]
            assert [(b["label"], b["style"]) for b in buttons] == [("Allow", 3), ("Deny", 4)]
            allow = buttons[0]["custom_id"]
            assert allow.startswith("/approve ")

            discord.push_press(message=question, user_id=MALLORY, custom_id=allow, guild_id=GUILD)
            sent = await discord.wait_sent(2)
            assert sent[1]["content"].startswith("Only the person this turn answers")
            discord.push_press(message=question, user_id=ALICE, custom_id=allow, guild_id=GUILD)
            sent = await discord.wait_sent(4)
            assert [m["content"] for m in sent[2:]] == ["Approved: write_file", "written"]
            assert (s.home.paths.workspace_root / "shared" / "d.txt").read_text() == "hi"
            await discord.wait_callbacks(2)  # each press acknowledged (a deferred update)
            assert [c["type"] for c in discord.callbacks] == [6, 6]
            refusals = s.audit("approval.refuse")
            assert [(e["actor"], e["outcome"]) for e in refusals] == [
                (f"chat:{MALLORY}", "refused")
            ]
            assert s.audit("approval.answer")[0]["actor"] == f"chat:{ALICE}"

            # the commands are in Discord's "/" menu; one run from it never reaches the model
            names = {c["name"] for c in discord.commands}
            assert {"new", "stop", "model", "status", "usage", "approve", "help"} <= names
            discord.push_command(channel_id=GENERAL, user_id=ALICE, name="model",
                                 args="gpt-5-secret", guild_id=GUILD)  # fmt: skip
            sent = await discord.wait_sent(5)
            assert "not a model the config lists" in sent[4]["content"]
            await discord.wait_callbacks(3)
            assert discord.callbacks[2]["type"] == 4  # answered at once: the command as typed
            assert discord.callbacks[2]["data"]["content"] == "/model gpt-5-secret"
            assert len(model.requests) == 2  # the turn's two calls; none for the command
            discord.push_command(channel_id="666666666666666666", user_id=MALLORY,
                                 name="status", guild_id=GUILD)  # fmt: skip
            await discord.wait_callbacks(4)  # a stranger: told so, and only they see it
            assert discord.callbacks[3]["data"]["flags"] == 64
            assert len(discord.sent) == 5
