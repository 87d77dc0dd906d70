"""A laptop's lid closed in the middle of a heartbeat turn, as a real gateway frozen
with SIGSTOP and continued with SIGCONT (issue 35): the process stands still while
the world goes on, so its claim on the unit runs out and its open connections
(the model's reply, Telegram's long poll) wait for it.

After waking: the result arrives once, no cycle runs the unit twice, and the
Telegram channel answers the next chat message.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import OWNER_ID, Home, poll, with_tasks
from vikingbot.testing.fake_openai import reply

LEASE_S = 1  # the claim on the unit runs out well inside the freeze
FROZEN_S = 4 * LEASE_S
INTERVAL_S = 10


def test_a_turn_frozen_past_its_claim_delivers_once_and_the_chat_answers_after(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    home.write_config(
        gateway={"shutdown_grace_s": 5, "lease_s": LEASE_S},
        heartbeat={"timezone": "UTC", "interval_seconds": INTERVAL_S},
    )
    home.add_user_session()
    home.write_heartbeat(with_tasks("- Check whether the night's backup finished"))
    # the model answers while the gateway is frozen: the reply waits in the socket
    home.llm.script([reply("The backup failed at 03:10.", delay_s=1.0)])
    home.next_cycle_in(1, interval_s=INTERVAL_S)
    gw = gateways(home)
    assert gw.proc is not None
    poll(lambda: len(home.llm.requests) == 1, "the turn's model call")
    os.kill(gw.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(FROZEN_S)  # the suspend itself: the claim expires, the reply is sent
    finally:
        os.kill(gw.proc.pid, signal.SIGCONT)

    sent = home.telegram.wait_for_sent(1, timeout=30)
    assert [m["text"] for m in sent] == ["The backup failed at 03:10."]
    run = poll(
        lambda: [r for r in home.ledger() if r["decision"] == "run" and r["outcome"]],
        "the run's outcome in the ledger",
    )
    assert [r["outcome"] for r in run] == ["delivered"]

    # the channel's long poll survived the freeze: a chat message is answered
    home.llm.script(["Yes, I am here."])
    home.telegram.push_text(chat_id=OWNER_ID, user_id=OWNER_ID, text="still there?")
    answered = home.telegram.wait_for_sent(2, timeout=30)
    assert answered[1]["text"] == "Yes, I am here."

    # one turn per cycle, never two at once, and no second message (sent: the result
    # and the chat's answer; any later cycle's checklist turn says HEARTBEAT_OK)
    assert gw.stop() == 0
    runs = [r for r in home.ledger() if r["decision"] == "run"]
    assert len({r["cycle_id"] for r in runs}) == len(runs)
    assert len(home.llm.requests) == len(runs) + 1
    assert len(home.telegram.sent) == 2
