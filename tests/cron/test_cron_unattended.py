"""A cron run through the real agent loop and a scripted OpenAI server: safe tools only.

Nobody watches a cron run, so the model asking for ``exec`` (or for the ``cron``
tool itself) is denied and audited, a read-only tool runs, and the reply is
delivered to the owner. Runs on both state database backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vikingbot.agent.loop import BuiltinLoop
from vikingbot.bus import MessageBus
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.cron.service import CronService
from vikingbot.delivery.service import DeliveryService, Outgoing
from vikingbot.delivery.types import OutboundMessage
from vikingbot.session.store import SessionStore
from vikingbot.store.db import StateStore
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_calls
from vikingbot.workspace.manager import WorkspaceManager


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as fake:
        yield fake


async def test_exec_is_denied_and_audited_in_a_cron_run(
    store: StateStore, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    clock = FakeClock(datetime(2026, 1, 5, 12, 0, tzinfo=UTC))
    store.clock = clock
    config = Config.model_validate(
        {
            "bot": {
                "owner": "telegram:42",
                "channels": {"telegram": {"enabled": True}},
                "agents": {"provider": "openai", "model": "gpt-test"},
                "providers": {
                    "openai": {
                        "apiBase": fake_openai.base_url,
                        "apiKey": "sk-test",
                        "maxRetries": 0,
                    }
                },
            }
        }
    )
    sessions = SessionStore(tmp_path / "sessions", clock)
    workspaces = WorkspaceManager(tmp_path / "workspace")
    marker = tmp_path / "exec-ran"
    sent: list[OutboundMessage] = []

    async def platform(item: Outgoing) -> bool:
        sent.append(item.message)
        return True

    bus = MessageBus()
    loop = BuiltinLoop(
        config, sessions=sessions, store=store, bus=bus, workspaces=workspaces, clock=clock
    )
    service = CronService(
        config,
        store=store,
        agent=loop,
        delivery=DeliveryService(
            config, store=store, sessions=sessions, clock=clock, sink=platform
        ),
        sessions=sessions,
        workspaces=workspaces,
        clock=clock,
    )
    fake_openai.script(
        [
            tool_calls(
                ("exec", {"command": f"touch {marker}"}),
                ("cron", {"action": "add", "name": "more", "every": "1m", "prompt": "x"}),
                ("list_dir", {"path": "."}),
            ),
            reply("Cleanup skipped: I may not run commands unattended."),
        ]
    )
    service.jobs.add("nightly", "every", "1h", "Clean up the temp folder.")
    clock.advance(hours=1)
    try:
        [run] = await service.tick()
    finally:
        await loop.aclose()

    assert run.outcome == "delivered"
    assert not marker.exists()  # exec never ran
    assert [j.name for j in service.jobs.list()] == ["nightly"]  # nor did the cron tool
    assert [(m.channel, m.chat_id, m.text) for m in sent] == [
        ("telegram", "42", "Cleanup skipped: I may not run commands unattended.")
    ]

    first, second = fake_openai.requests
    assert "Clean up the temp folder." in first.last_user_text
    exec_result, cron_result, list_result = (
        m["content"] for m in second.messages if m["role"] == "tool"
    )
    assert exec_result.startswith("Tool call refused: exec is not in bot.heartbeat.safe_tools")
    assert cron_result.startswith("Tool call refused: cron is not in bot.heartbeat.safe_tools")
    assert "HEARTBEAT.md" in list_result  # the read-only tool ran in the job's workspace

    denied = {e["subject"]: e for e in store.audit_events(action="tool.deny")}
    assert set(denied) == {"exec", "cron"}
    assert denied["exec"]["actor"] == "cron:nightly"
    assert denied["exec"]["details"]["run_id"] == run.run_id
    assert denied["exec"]["details"]["unattended"] is True
    [approved] = store.audit_events(action="tool.approve")
    assert approved["subject"] == "list_dir" and approved["actor"] == "cron:nightly"
    [cron_run] = store.audit_events(action="cron.run")
    assert cron_run["outcome"] == "delivered"
