"""The outbox across a crash: SIGKILL between "the agent answered" and "Telegram took it"."""

from __future__ import annotations

import signal
from collections.abc import Callable

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import OWNER_ID, OWNER_KEY, Home, poll, with_tasks
from vikingbot.testing.fake_openai import tool_call

TEXT = "Your passport expires in 30 days."


def test_a_message_pending_at_a_crash_arrives_exactly_once_after_restart(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    # many send retries with backoff: the row stays pending for minutes, not seconds
    home.write_config(channels={"send_retries": 20})
    home.add_user_session()
    home.write_heartbeat(with_tasks("- Remind me about documents that expire soon"))
    home.llm.script([tool_call("message", {"text": TEXT}), "HEARTBEAT_OK"])
    for _ in range(100):  # Telegram is down: every sendMessage gets a 500 for now
        home.telegram.fail_next_send(500, "Internal Server Error")

    first = gateways(home)
    (row,) = poll(
        lambda: [r for r in home.outbox() if r.text == TEXT],
        "the heartbeat's message in the outbox",
    )
    poll(
        lambda: len(home.telegram.send_errors) < 100,
        "a refused sendMessage (the platform did not take the message)",
    )
    first.stop(signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL

    (row,) = [r for r in home.outbox() if r.text == TEXT]
    assert row.status == "pending"
    assert (row.channel, row.chat_id) == ("telegram", str(OWNER_ID))
    assert home.telegram.sent == []
    assert len(home.llm.requests) == 1  # the turn stopped inside its message tool call

    home.telegram.send_errors.clear()  # Telegram is back
    second = gateways(home)
    sent = home.telegram.wait_for_sent(1, timeout=60)
    poll(
        lambda: [r for r in home.outbox() if r.text == TEXT and r.status == "sent"],
        "the outbox row marked sent",
    )
    assert second.stop() == 0
    assert sent == [
        {"chat_id": str(OWNER_ID), "text": TEXT, "message_thread_id": None, "parse_mode": "HTML"}
    ]
    assert home.telegram.sent == sent  # exactly once
    assert len(home.llm.requests) == 1  # the restart did not run the turn again
    poll(lambda: "re-sending" in home.log_text(), "the restart's re-sending line in the log")
    # delivered after the crash, and like any delivery recorded in the owner's chat
    history = home.sessions().read_messages(OWNER_KEY)
    assert [m.content for m in history if m.role == "assistant"] == [TEXT]
