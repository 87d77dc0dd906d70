"""The gateway dying in the middle of a CLI request (issue 9, "Bad input and faults").

`vikingbot heartbeat run-now` waits on the gateway; the gateway is SIGKILLed while
its turn is in flight. The CLI says the gateway stopped and exits 1; after a
restart every message reaches Telegram exactly once, and the dead gateway's claim
does not keep the workspace busy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import OWNER_ID, TIMEOUT_S, Home, poll, with_tasks
from vikingbot.testing.fake_openai import reply, tool_call

Start = Callable[[Home], GatewayProcess]
TEXT = "Disk at 93% on the VPS."


def run_now_in_background(home: Home) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    env["VIKINGBOT_HOME"] = str(home.path)
    return subprocess.Popen(
        [sys.executable, "-m", "vikingbot", "heartbeat", "run-now", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_home(home: Home, gateways: Start) -> GatewayProcess:
    home.add_user_session()
    gw = gateways(home)
    poll(lambda: any(r["reason"] == "empty" for r in home.ledger()), "the first cycle")
    home.write_heartbeat(with_tasks("- Check whether the VPS disk is over 90%"))
    return gw


def assert_cli_reports_the_death(cli: subprocess.Popen[str], pid: int) -> None:
    out, err = cli.communicate(timeout=TIMEOUT_S)
    assert cli.returncode == 1, (out, err)
    assert out == ""  # no half result on stdout
    assert f"pid {pid}" in err and "stopped while handling this request" in err, err


def test_killed_while_the_model_thinks(home: Home, gateways: Start) -> None:
    """The message already went out; the second model call never answers."""
    gw = start_home(home, gateways)
    home.llm.script([tool_call("message", {"text": TEXT}), reply("HEARTBEAT_OK", delay_s=600)])
    cli = run_now_in_background(home)
    try:
        home.telegram.wait_for_sent(1)
        poll(lambda: len(home.llm.requests) == 2, "the turn's second model call (held)")
        assert cli.poll() is None  # still waiting on the gateway
        assert gw.proc is not None
        pid = gw.proc.pid
        gw.stop(signal.SIGKILL)
        assert_cli_reports_the_death(cli, pid)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.communicate()  # reaps it and closes its pipes
    (row,) = [r for r in home.outbox() if r.text == TEXT]
    assert row.status == "sent"

    again = gateways(home)
    assert again.get("/health")["status"] == "ok"
    # the dead gateway's claim on the workspace does not keep it busy
    rows = home.cli_json("heartbeat", "run-now")
    assert [(r["workspace"], r["decision"], r["via"]) for r in rows] == [
        ("shared", "run", "gateway")
    ], rows
    assert again.stop() == 0
    assert [(m["chat_id"], m["text"]) for m in home.telegram.sent] == [(str(OWNER_ID), TEXT)]


def test_killed_while_a_message_waits_in_the_outbox(home: Home, gateways: Start) -> None:
    """Telegram refuses for now: the message is pending when the gateway dies."""
    home.write_config(channels={"send_retries": 20})  # retries for minutes, not seconds
    gw = start_home(home, gateways)
    home.llm.script([tool_call("message", {"text": TEXT}), "HEARTBEAT_OK"])
    for _ in range(100):
        home.telegram.fail_next_send(500, "Internal Server Error")
    cli = run_now_in_background(home)
    try:
        poll(lambda: [r for r in home.outbox() if r.text == TEXT], "the message in the outbox")
        poll(lambda: len(home.telegram.send_errors) < 100, "a refused sendMessage")
        assert gw.proc is not None
        pid = gw.proc.pid
        gw.stop(signal.SIGKILL)
        assert_cli_reports_the_death(cli, pid)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.communicate()  # reaps it and closes its pipes
    (row,) = [r for r in home.outbox() if r.text == TEXT]
    assert row.status == "pending"
    assert home.telegram.sent == []

    home.telegram.send_errors.clear()  # Telegram is back
    again = gateways(home)
    home.telegram.wait_for_sent(1)
    poll(lambda: [r for r in home.outbox() if r.text == TEXT and r.status == "sent"], "sent")
    assert again.stop() == 0
    assert [(m["chat_id"], m["text"]) for m in home.telegram.sent] == [(str(OWNER_ID), TEXT)]
