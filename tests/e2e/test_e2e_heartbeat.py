"""The heartbeat in a running gateway: what the first cycle asks the model and sends."""

from __future__ import annotations

from collections.abc import Callable

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import (
    HB_KEY,
    OWNER_ID,
    OWNER_KEY,
    TEMPLATE_HEAD,
    Home,
    poll,
    with_tasks,
)
from vikingbot.testing.fake_openai import reply, tool_call

Start = Callable[[Home], GatewayProcess]


def runs_of(home: Home) -> list[dict[str, object]]:
    return [r for r in home.ledger() if r["decision"] == "run"]


def test_one_task_one_turn_and_its_message_reaches_the_owner_once(
    home: Home, gateways: Start
) -> None:
    home.add_user_session()
    home.write_heartbeat(with_tasks("- Check whether the nightly build is green"))
    home.llm.script(
        [tool_call("message", {"text": "The nightly build is red since 02:10."}), "HEARTBEAT_OK"]
    )
    gw = gateways(home)
    (run,) = poll(
        lambda: [r for r in runs_of(home) if r["outcome"] is not None],
        "the first heartbeat run in the ledger",
    )
    assert gw.stop() == 0
    # the turn: one request that asked for the message tool, one that ended it
    assert len(home.llm.requests) == 2, gw.output
    first = home.llm.requests[0]
    assert first.last_user_text.startswith("Read HEARTBEAT.md in your workspace")
    assert "message" in first.tool_names
    assert home.telegram.sent == [
        {
            "chat_id": str(OWNER_ID),
            "text": "The nightly build is red since 02:10.",
            "message_thread_id": None,
            "parse_mode": "HTML",
        }
    ]
    assert (run["workspace"], run["reason"], run["outcome"]) == ("shared", "due", "delivered")
    assert run["model_calls"] == 2
    assert [r for r in home.outbox() if r.status != "sent"] == []
    # the owner's chat history records what was sent, so a reply to it has context
    history = home.sessions().read_messages(OWNER_KEY)
    assert [m.content for m in history if m.role == "assistant"] == [
        "The nightly build is red since 02:10."
    ]


def test_heartbeat_ok_sends_nothing_and_leaves_history_unchanged(
    home: Home, gateways: Start
) -> None:
    owner_file = home.add_user_session()
    home.write_heartbeat(with_tasks("- Tell me if a new invoice arrived"))
    before = owner_file.read_bytes()
    home.llm.script([reply("HEARTBEAT_OK")])
    gw = gateways(home)
    (run,) = poll(
        lambda: [r for r in runs_of(home) if r["outcome"] is not None],
        "the first heartbeat run in the ledger",
    )
    assert gw.stop() == 0
    assert run["outcome"] == "noop" and run["model_calls"] == 1
    assert len(home.llm.requests) == 1
    assert home.telegram.sent == []
    assert home.outbox() == []
    assert owner_file.read_bytes() == before
    assert home.sessions().read_messages(HB_KEY) == []


def test_untouched_template_makes_no_model_call(home: Home, gateways: Start) -> None:
    home.add_user_session()
    # no HEARTBEAT.md written: the gateway's first start creates it from the template
    gw = gateways(home)
    (skip,) = poll(lambda: home.ledger(), "the first heartbeat decision in the ledger")
    assert (skip["workspace"], skip["decision"], skip["reason"]) == ("shared", "skip", "empty")
    assert (home.workspace() / "HEARTBEAT.md").read_text().startswith(TEMPLATE_HEAD)
    assert gw.stop() == 0
    assert home.llm.requests == []
    assert home.telegram.sent == []
