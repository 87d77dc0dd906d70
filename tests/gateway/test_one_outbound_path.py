"""One outbound path: a target the agent picks in any turn goes through delivery.

Through the real agent loop and a scripted model, a cron job, a dashboard prompt
and a chat turn each call ``message`` with a chat that ``allow_from`` does not
list (telegram:999). Each time the target is refused and audited, and the text
goes to the owner (telegram:42) instead; nothing reaches 999.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.harness import Harness, build_harness
from vikingbot.bus import InboundMessage
from vikingbot.cron.service import CronService
from vikingbot.delivery.inbox import Inbox
from vikingbot.gateway.supervisor import Gateway
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

FORBIDDEN = "telegram:999"


def sneaky(text: str) -> list[object]:
    return [tool_call("message", {"text": text, "target": FORBIDDEN}), reply("HEARTBEAT_OK")]


def refusals(h: Harness) -> list[tuple[str, str]]:
    return [(e["actor"], e["subject"]) for e in h.rt.store.audit_events(action="delivery.refuse")]


def chats(h: Harness) -> list[tuple[str, str]]:
    return [(f"{m.channel}:{m.chat_id}", m.text) for m in h.sent]


async def test_cron_turn_cannot_message_a_chat_off_the_allow_list(tmp_path: Path) -> None:
    with FakeOpenAI.start() as fake:
        async for h in build_harness(tmp_path, fake):
            rt = h.rt
            cron = CronService(
                rt.config,
                store=rt.store,
                agent=rt.agent(),
                delivery=rt.delivery,
                sessions=rt.sessions,
                workspaces=rt.workspaces,
                clock=rt.clock,
            )
            cron.jobs.add("nightly", "every", "1h", "Report the disk usage.")
            fake.script(sneaky("disk at 93%"))
            run = await cron.run_now("nightly")
            assert run.outcome == "noop"  # the final reply was HEARTBEAT_OK
            assert chats(h) == [("telegram:42", "disk at 93%")]
            assert refusals(h) == [("cron:nightly", FORBIDDEN)]


async def test_dashboard_turn_cannot_message_a_chat_off_the_allow_list(tmp_path: Path) -> None:
    with FakeOpenAI.start() as fake:
        async for h in build_harness(tmp_path, fake):
            gw = Gateway(h.rt, say=lambda _line: None)
            fake.script(sneaky("summary for you"))
            await gw.dispatch.answer_prompt(7, "ops", "Summarise the alerts")
            assert chats(h) == [("telegram:42", "summary for you")]
            assert refusals(h) == [("dashboard", FORBIDDEN)]
            # the turn's own answer (a no-op here) stays in its slot, nothing else leaks
            assert [i.slot for i in Inbox(h.rt.store).items()] == ["ops"]


async def test_chat_turn_cannot_message_a_chat_off_the_allow_list(tmp_path: Path) -> None:
    with FakeOpenAI.start() as fake:
        async for h in build_harness(tmp_path, fake):
            # a chat platform cannot ask for approval: the owner allowed `message` outright
            h.rt.config.bot.tools.auto_approve = ["message"]
            gw = Gateway(h.rt, say=lambda _line: None)
            fake.script(
                [
                    tool_call("message", {"text": "hello 999", "target": FORBIDDEN}),
                    tool_call("message", {"text": "to you"}),
                    reply("done"),
                ]
            )
            await gw.dispatch.answer(InboundMessage("telegram", "42", "42", "spread the word"))
            # refused target -> the owner; no target -> this chat; then the final reply
            assert chats(h) == [
                ("telegram:42", "hello 999"),
                ("telegram:42", "to you"),
                ("telegram:42", "done"),
            ]
            assert refusals(h) == [("chat:telegram:default:42", FORBIDDEN)]
