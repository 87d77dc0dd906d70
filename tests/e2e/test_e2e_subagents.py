"""Sub-agents in a real gateway (issue 46), with the scripted model and the fake Telegram.

A Telegram message whose turn spawns two sub-agents: the reply comes at once, then each
result, exactly once (one in time, one out of time); `/health` lists them while they run.
A control-API chat whose client hangs up mid-turn: the turn and its sub-agent stop.
"""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Callable

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import OWNER_ID, Home, poll
from vikingbot.testing.fake_llm import RecordedRequest, Step
from vikingbot.testing.fake_openai import reply, tool_call, tool_calls


def after_tools(req: RecordedRequest) -> bool:
    """The parent's second call of its turn (its spawn calls answered)."""
    return bool(req.messages) and req.messages[-1].get("role") == "tool"


def respond(req: RecordedRequest) -> Step:
    text = req.last_user_text
    if "You are a sub-agent" in req.text:
        if "QUICK" in text:
            return reply("The answer is 42.", delay_s=0.5)
        return reply("never", delay_s=120)  # SLOW runs out of time, HANGING is cancelled
    if "QUICK CHAT" in text:
        if after_tools(req):
            return reply("A helper is on it.")
        return tool_call("spawn", {"task": "QUICK: answer", "label": "attached"})
    if "LONG WORK" in text:
        if after_tools(req):
            return reply("done", delay_s=120)  # the parent is still busy when the client leaves
        return tool_call("spawn", {"task": "HANGING: wait", "label": "hanging"})
    if after_tools(req):
        return reply("On it: two helpers are working.")
    return tool_calls(
        ("spawn", {"task": "QUICK: answer", "label": "quick"}),
        ("spawn", {"task": "SLOW: think", "label": "slow"}),
    )


def running(gw: GatewayProcess) -> list[str]:
    return [s["label"] for s in gw.get("/health")["agent"]["subagents"]]


def test_results_reach_the_chat_once_and_a_client_that_leaves_stops_them(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    home.write_config(agents={"subagentTimeoutS": 2.5})
    home.llm.responder = respond
    gw = gateways(home)

    home.telegram.push_text(chat_id=OWNER_ID, user_id=OWNER_ID, text="Please find out two things")
    sent = home.telegram.wait_for_sent(2)
    assert sent[0]["text"] == "On it: two helpers are working."
    assert sent[1]["text"].startswith("Sub-agent 1 (quick) finished")
    assert "The answer is 42." in sent[1]["text"]
    assert running(gw) == ["slow"]  # status lists the one still running
    sent = home.telegram.wait_for_sent(3)
    assert sent[2]["text"].startswith("Sub-agent 2 (slow) ran out of time")
    assert running(gw) == []

    # an attached `vikingbot chat` (control API): the answer first, the late result in the
    # inbox its follower reads
    secret = (home.path / "run" / "control.secret").read_text().strip()
    auth = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    ask = json.dumps({"text": "QUICK CHAT", "session": "cli:default:local"}).encode()
    req = urllib.request.Request(gw.base_url + "/api/v1/chat", data=ask, headers=auth)
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert json.loads(resp.read())["reply"] == "A helper is on it."
    (late,) = poll(lambda: home.inbox() or None, "the sub-agent's result in the inbox")
    assert "Sub-agent 1 (attached) finished" in late.text and "The answer is 42." in late.text

    # a control-API chat turn whose client hangs up (Ctrl-C in an attached chat)
    body = json.dumps({"text": "LONG WORK please", "session": "cli:default:local"}).encode()
    host, port = gw.base_url.split("//")[1].split(":")
    conn = socket.create_connection((host, int(port)), timeout=30)
    conn.sendall(
        f"POST /api/v1/chat HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {secret}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    poll(lambda: running(gw) == ["hanging"] or None, "the sub-agent to start")
    conn.close()  # Ctrl-C in an attached chat: the client hangs up
    poll(lambda: running(gw) == [] or None, "the sub-agent to be cancelled")
    assert "cancelled 1 sub-agent(s) of cli:default:local" in home.log_text()
    assert len(home.telegram.sent) == 3  # each result once, nothing more
    assert gw.stop() == 0
