"""`vikingbot chat` attached to a running gateway, in a real pseudo-terminal: it says how
many unread inbox items wait, prints cron results as they arrive, and Ctrl-C cancels the
turn in the gateway (the prompt kept, no half reply)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.chat_terminal import Terminal
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import TIMEOUT_S, Home, poll, with_tasks
from vikingbot.testing.fake_openai import FakeOpenAI, RecordedRequest, Step, error, reply, tool_call

SESSION = "cli:default:local"


@pytest.fixture
def gw_home(tmp_path: Path) -> Iterator[Home]:
    telegram = FakeTelegram()
    with FakeOpenAI.start() as llm, telegram.serve() as api:
        home = Home(tmp_path / "home", llm, telegram, api)
        home.write_config()
        yield home


@pytest.fixture
def gateway(gw_home: Home) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(gw_home.path, start_timeout_s=TIMEOUT_S).start()
    yield gw
    if gw.proc is not None and gw.proc.poll() is None:
        gw.kill()


def add_inbox_item(home: Home, text: str) -> None:
    from vikingbot.clock import SystemClock
    from vikingbot.delivery.inbox import Inbox
    from vikingbot.store.db import StateStore

    store = StateStore.open(home.database_url)
    try:
        Inbox(store, SystemClock()).add("default", text, source="test")
    finally:
        store.close()


def test_attached_chat_counts_unread_items_and_prints_cron_results_as_they_come(
    gw_home: Home, gateway: GatewayProcess
) -> None:
    add_inbox_item(gw_home, "an older result")

    def answer(req: RecordedRequest) -> Step | None:
        text = req.last_user_text or ""
        if "What is new on the status page?" in text:
            return reply("All systems **green**.")
        if text == "hello":
            return reply("Hello through the gateway.")
        return None

    gw_home.llm.responder = answer
    res = gw_home.cli(
        "cron", "add", "status", "--every", "1h", "--target", "dashboard",
        "--prompt", "What is new on the status page?",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    chat = Terminal.start(gw_home.path)
    try:
        chat.wait_for(r"via the gateway \(pid \d+\)")
        chat.wait_for(r"1 unread inbox item\(s\)")
        at = chat.prompt()
        chat.line("hello")
        chat.wait_for(r"Hello through the gateway\.", after=at)
        at = chat.prompt(at)

        done: dict[str, object] = {}
        runner = threading.Thread(
            target=lambda: done.update(res=gw_home.cli("cron", "run", "status")), daemon=True
        )
        runner.start()  # a cron run in another terminal, while the chat waits at its prompt
        chat.wait_for(r"from cron.*\n.*All systems green\.", after=at)
        runner.join(TIMEOUT_S)
        assert "an older result" not in chat.text  # told as a count, not replayed
    finally:
        chat.close()


def test_ctrl_c_cancels_the_turn_in_the_gateway(gw_home: Home, gateway: GatewayProcess) -> None:
    gw_home.llm.script([reply("far too late", delay_s=60), reply("Still here.")])
    chat = Terminal.start(gw_home.path)
    try:
        at = chat.prompt()
        chat.line("take your time")
        chat.wait_for(r"working · [1-9]\d*s", after=at)
        poll(lambda: gw_home.llm.requests, "the turn to reach the model")
        chat.ctrl_c()
        chat.wait_for(r"turn cancelled", after=at)
        at = chat.prompt(at)
        # the gateway cancelled the turn: the prompt is in the session, no reply
        log = gw_home.data / "logs" / "vikingbot.log"  # INFO lines go to the log file
        poll(
            lambda: log.is_file() and "client went away" in log.read_text(errors="replace"),
            "the gateway to see the client go",
        )  # logged once the turn's history is written
        history = [(m.role, m.content) for m in gw_home.sessions().read_messages(SESSION)]
        assert history == [("user", "take your time")]
        chat.line("are you there?")
        chat.wait_for(r"Still here\.", after=at)
        assert "far too late" not in chat.text
        chat.prompt(at)
        chat.ctrl_d()
        assert chat.wait_exit() == 0
    finally:
        chat.close()


@pytest.mark.parametrize("session_heartbeat", ["off", "on"])
def test_the_terminal_only_user_sees_the_heartbeat_result_arrive_in_the_chat(
    gw_home: Home, session_heartbeat: str
) -> None:
    """Issue 9 item 7. "on": following `heartbeat plan`'s fix for the terminal session's
    skip-flag (`vikingbot sessions heartbeat on cli:default:local`) made the session the
    result's destination, and the gateway printed it on its own stdout as `delivered`;
    it lands in the inbox and the attached chat either way."""
    gw_home.write_config(
        owner=None,
        channels={"cli": {"enabled": True}, "telegram": {"enabled": False}},
        heartbeat={"timezone": "UTC", "interval_seconds": 10},
    )
    # the first scheduled cycle comes once the chat is attached and the session's flag
    # set, not at the gateway's start (a whole 10 s interval before the task is seen)
    gw_home.next_cycle_in(6, interval_s=10)
    gw = GatewayProcess(gw_home.path, start_timeout_s=TIMEOUT_S).start()
    chat = Terminal.start(gw_home.path)
    try:
        gw_home.llm.script([reply("Hello, I am here.")])
        at = chat.prompt()
        chat.line("hi")
        chat.wait_for(r"Hello, I am here\.", after=at)
        at = chat.prompt(at)
        res = gw_home.cli("sessions", "heartbeat", session_heartbeat, SESSION)
        assert res.returncode == 0, res.stderr
        gw_home.llm.script([reply("Free disk space: 40 GB on /.")])
        gw_home.write_heartbeat(with_tasks("- Tell me how much disk space is free"))
        # the next scheduled cycle runs the task; its result is printed at the prompt
        chat.wait_for(r"from heartbeat.*\n.*Free disk space: 40 GB on /\.", after=at)
        assert len(gw_home.llm.requests) == 2
        # the chat can print the result before the cycle commits its ledger row
        (run,) = poll(
            lambda: [r for r in gw_home.ledger() if r["decision"] == "run"], "the run recorded"
        )
        assert run["outcome"] == "inboxed", run
        items = gw_home.cli_json("inbox")
        assert [i["text"] for i in items] == ["Free disk space: 40 GB on /."]
        assert "Free disk space" not in gw.read_output()  # not on the gateway's stdout
    finally:
        chat.close()
        gw.kill()


def test_the_gateways_sdk_retries_are_shown_in_the_attached_chat(gw_home: Home) -> None:
    openai = {"api_base": gw_home.llm.base_url, "api_key": "sk-e2e", "max_retries": 2}
    gw_home.write_config(providers={"openai": openai})
    gw = GatewayProcess(gw_home.path, start_timeout_s=TIMEOUT_S).start()
    gw_home.llm.script([error(503), error(503), reply("Made it.")])
    chat = Terminal.start(gw_home.path)
    try:
        at = chat.prompt()
        chat.line("hello")
        chat.wait_for(r"Made it\.", after=at)
        lines = [ln for ln in chat.text[at:].splitlines() if "retrying" in ln]
        assert [ln.split("↻")[-1].strip() for ln in lines] == [
            "the model API answered 503; retrying in 0.0 s (retry 1 of 2)",
            "the model API answered 503; retrying in 0.0 s (retry 2 of 2)",
        ]
    finally:
        chat.close()
        gw.kill()


def test_a_gateway_stopping_mid_turn_is_one_error_line_and_the_chat_goes_on(
    gw_home: Home,
) -> None:
    # the turn never ends by itself: the stop waits out the grace (1 s, the default,
    # not the e2e home's 5 s) and cancels it
    gw_home.write_config(gateway={"shutdown_grace_s": 1})
    gateway = GatewayProcess(gw_home.path, start_timeout_s=TIMEOUT_S).start()
    gw_home.llm.script([reply("far too late", delay_s=60)])
    chat = Terminal.start(gw_home.path)
    try:
        at = chat.prompt()
        chat.line("take your time")
        poll(lambda: gw_home.llm.requests, "the turn to reach the model")
        assert gateway.stop(timeout=30) == 0
        chat.wait_for(r"Error: .*the gateway is stopping; this request was cancelled", after=at)
        chat.prompt(at)
        assert chat.text.count("Error:") == 1  # the turn's failure, told once
        history = [(m.role, m.content) for m in gw_home.sessions().read_messages(SESSION)]
        assert history == [("user", "take your time")]
    finally:
        chat.close()
        gateway.kill()


def test_the_attached_chat_is_asked_before_a_tool_and_no_answer_denies(gw_home: Home) -> None:
    """Issue 42 item 5: the gateway asks the terminal through the chat stream."""
    gw_home.write_config(channels={"cli": {"enabled": False, "approval_timeout_s": 3}})
    gw = GatewayProcess(gw_home.path, start_timeout_s=TIMEOUT_S).start()
    gw_home.llm.script(
        [
            tool_call("write_file", {"path": "yes.txt", "content": "y"}),
            reply("Wrote it."),
            tool_call("write_file", {"path": "no.txt", "content": "n"}),
            reply("Left it."),
            tool_call("write_file", {"path": "late.txt", "content": "t"}),
            reply("Nobody answered."),
        ]
    )
    workspace = gw_home.data / "workspace" / "shared"
    chat = Terminal.start(gw_home.path)
    try:
        for line, answer, said in (
            ("write yes", "y", r"Wrote it\."),
            ("write no", "n", r"Left it\."),
            ("write late", None, r"no answer in time: denied(.|\n)*Nobody answered\."),
        ):
            at = chat.prompt()
            chat.line(line)
            chat.wait_for(
                r'Allow write_file \{"content": "\w", "path": "\w+\.txt"\}\? \[y/N\]', after=at
            )
            if answer is not None:
                chat.line(answer)
            chat.wait_for(said, after=at)
        assert (workspace / "yes.txt").read_text() == "y"
        assert not (workspace / "no.txt").exists() and not (workspace / "late.txt").exists()
    finally:
        chat.close()
        gw.kill()
