"""Chat messages from different chats are answered in parallel, each in its own session."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.support.harness import build_harness
from vikingbot.bus import InboundMessage
from vikingbot.gateway.supervisor import Gateway
from vikingbot.testing.fake_openai import FakeOpenAI, reply


async def test_two_chats_do_not_wait_for_each_other(tmp_path: Path) -> None:
    with FakeOpenAI.start(default=reply("pong", delay_s=1.0)) as fake:
        async for h in build_harness(tmp_path, fake):
            await h.rt.agent().ensure_provider()  # type: ignore[attr-defined]
            gw = Gateway(h.rt, say=lambda _line: None)
            task = asyncio.create_task(gw.dispatch.serve_inbound(h.rt.bus, gw.stop_event))
            t0 = time.monotonic()
            for chat in ("42", "43"):
                await h.rt.bus.publish_inbound(InboundMessage("telegram", chat, chat, "ping"))
            try:
                for _ in range(300):
                    await asyncio.sleep(0.02)
                    if len(h.sent) == 2:
                        break
            finally:
                gw.stop_event.set()
                await asyncio.wait_for(task, 10)
            elapsed = time.monotonic() - t0
            assert sorted((m.chat_id, m.text) for m in h.sent) == [("42", "pong"), ("43", "pong")]
            assert elapsed < 1.9, f"answers took {elapsed:.2f}s: the chats ran one after the other"
            for chat in ("42", "43"):
                history = h.rt.sessions.read_messages(f"telegram:default:{chat}")
                assert [(m.role, m.content) for m in history] == [
                    ("user", "ping"),
                    ("assistant", "pong"),
                ]
