"""A gateway killed while it streams a reply into Telegram (a real gateway process,
python-telegram-bot against the fake Bot API, a model that writes slowly): after the
restart the person has the final reply exactly once, in the one message the killed
run had begun (issue 44: "a crashed stream leaves at most one partial message, which
is then completed or replaced")."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, cast

from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import OWNER_ID, Home, poll
from tests.support.trickle_model import TrickleModel
from vikingbot.testing.fake_openai import FakeOpenAI


def test_a_gateway_killed_mid_stream_completes_the_one_preview_after_its_restart(
    tmp_path: Path,
) -> None:
    words = [f"word{i} " for i in range(30)] + ["**done**"]
    final = "".join(words[:-1]) + "<b>done</b>"
    telegram = FakeTelegram(max_poll_s=0.2)
    # slow while the first gateway streams (6 s: it is surely killed mid-reply), then quick
    with TrickleModel.start(words, every_s=0.2) as model, telegram.serve() as api:
        home = Home(tmp_path / "home", cast(FakeOpenAI, model), telegram, api)
        section = {
            "enabled": True,
            "token": telegram.token,
            "api_base": api,
            "allow_from": [str(OWNER_ID)],
            "stream_replies": True,
        }
        channels = {"cli": {"enabled": False}, "telegram": section}
        home.write_config(channels=channels, gateway={"shutdown_grace_s": 2})
        first = GatewayProcess(home.path, start_timeout_s=60, log=tmp_path / "gw-1.out").start()
        try:
            telegram.push_text(chat_id=OWNER_ID, user_id=OWNER_ID, text="write a lot")
            poll(lambda: telegram.calls_of("editMessageText"), "the preview edited", 30)
        finally:
            first.stop(signal.SIGKILL)  # mid-stream: the turn and its reply are lost with it
        with telegram._cond:
            (preview,) = telegram.sent
            assert preview["text"] != final and preview.get("parse_mode") is None
        assert len(model.requests) == 1
        model.every_s = 0.03

        with GatewayProcess(home.path, start_timeout_s=60, log=tmp_path / "gw-2.out") as second:

            def done() -> list[dict[str, Any]] | None:
                with telegram._cond:
                    return [m for m in telegram.sent if m["text"] == final] or None

            poll(done, "the final reply after the restart", 40)
        assert second.returncode == 0, second.output[-4000:]
    with telegram._cond:
        (message,) = telegram.sent  # the killed run's preview, completed: no second message
    assert message is preview and message["parse_mode"] == "HTML"
    assert len(model.requests) == 2  # the kept message was answered again, once
