"""The gateway's steering in one process (real dispatcher, scripted model, recorded sends):
the terminal's commands, /stop, /new, and no question ever asked for an unattended turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.harness import build_harness
from vikingbot.bus import InboundMessage
from vikingbot.channels.approval_ui import Question
from vikingbot.gateway import compose
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call


class AskingChannel:
    """Stands in for a running channel's ``ask`` only: records each question shown."""

    def __init__(self) -> None:
        from vikingbot.config.schema import ChannelBase

        self.config = ChannelBase(enabled=True)
        self.asked: list[Question] = []

    async def ask(self, chat_id: str, thread: str | None, question: Question) -> None:
        self.asked.append(question)

    async def typing(self, chat_id: str, thread: str | None) -> None:
        return None


async def test_terminal_commands_stop_and_new(tmp_path: Path) -> None:
    with FakeOpenAI.start(default=reply("late answer", delay_s=30)) as fake:
        async for h in build_harness(tmp_path, fake):
            d = compose.dispatch(h.rt)
            status = await d.chat("/status", "cli:default:local")
            assert status["reply"].startswith("Session: cli:default:local")
            assert status["model_calls"] == 0 and fake.requests == []

            turn = asyncio.create_task(d.answer(InboundMessage("telegram", "42", "42", "think")))
            for _ in range(500):
                if fake.requests:
                    break
                await asyncio.sleep(0.01)
            await d.answer(InboundMessage("telegram", "42", "42", "/stop"))
            await asyncio.wait_for(turn, 10)
            assert h.texts() == ["Stopped."]  # the command's answer; the turn sends nothing

            await d.answer(InboundMessage("telegram", "42", "42", "/new"))
            assert h.texts()[-1] == "New conversation started."
            assert h.rt.sessions.read_messages("telegram:default:42") == []


async def test_an_unattended_turn_never_asks_in_a_chat(tmp_path: Path) -> None:
    with FakeOpenAI.start() as fake:
        fake.script([tool_call("exec", {"command": "ls"}), reply("done")])
        async for h in build_harness(tmp_path, fake):
            d = compose.dispatch(h.rt)
            channel = AskingChannel()
            assert d.steering is not None
            d.steering.channel_of = lambda _name, c=channel: c  # type: ignore[misc]
            await d.answer_prompt(1, "default", "list the files")
            assert channel.asked == []
            tool_result = fake.requests[1].messages[-1]["content"]
            assert "safe_tools" in tool_result
