"""`prompt:dashboard:<slot>` results become an unattended turn whose reply lands in the slot."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.harness import build_harness
from vikingbot.delivery.inbox import Inbox
from vikingbot.gateway.supervisor import Gateway
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call


async def test_prompt_in_inbox_runs_once_and_answers_in_slot(tmp_path: Path) -> None:
    with FakeOpenAI.start() as fake:
        await _scenario(tmp_path, fake)


async def _scenario(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake):
        inbox = Inbox(h.rt.store, h.clock)
        inbox.add("ops", "Summarise the night's alerts", source="heartbeat:shared", kind="prompt")
        fake.script(
            [tool_call("exec", {"command": "rm -rf /tmp/x"}), reply("All quiet overnight.")]
        )
        gw = Gateway(h.rt, say=lambda _line: None)
        task = asyncio.create_task(gw.dispatch.dashboard_prompts(gw.stop_event, poll_s=0.05))
        try:
            for _ in range(200):
                await asyncio.sleep(0.05)
                if inbox.items(kind="message"):
                    break
        finally:
            gw.stop_event.set()
            await asyncio.wait_for(task, 10)
        (answer,) = inbox.items(kind="message")
        assert (answer.slot, answer.text) == ("ops", "All quiet overnight.")
        assert inbox.items(kind="prompt") == []  # taken once
        assert fake.requests[0].last_user_text == "Summarise the night's alerts"
        # nobody was watching: exec is not a safe tool, so it was denied and audited
        denied = h.rt.store.audit_events(action="tool.deny")
        assert [e["subject"] for e in denied] == ["exec"]
