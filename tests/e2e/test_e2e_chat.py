"""Talking to the bot: a Telegram DM through a running gateway to the model and back."""

from __future__ import annotations

from collections.abc import Callable

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import OWNER_ID, OWNER_KEY, Home, poll
from vikingbot.testing.fake_openai import RecordedRequest, Step, reply


def test_a_dm_gets_the_models_answer_back_in_the_same_chat(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    home.add_user_session()

    def answer(req: RecordedRequest) -> Step | None:
        if req.last_user_text == "What is on my calendar today?":
            return reply("Dentist at 15:00, nothing else.")
        return None  # anything else would get the default HEARTBEAT_OK

    home.llm.responder = answer
    gw = gateways(home)
    home.telegram.push_text(
        chat_id=OWNER_ID, user_id=OWNER_ID, text="What is on my calendar today?"
    )
    sent = home.telegram.wait_for_sent(1, timeout=60)
    assert sent == [
        {
            "chat_id": str(OWNER_ID),
            "text": "Dentist at 15:00, nothing else.",
            "message_thread_id": None,
            "parse_mode": "HTML",
        }
    ]
    # the turn is in the owner's history once the reply has gone out
    poll(
        lambda: any(
            m.role == "assistant" and m.content == "Dentist at 15:00, nothing else."
            for m in home.sessions().read_messages(OWNER_KEY)
        ),
        "the answer in the owner's session",
    )
    assert gw.stop() == 0
    assert len(home.llm.requests) == 1  # the template heartbeat asked nothing
    assert home.telegram.sent == sent  # nothing else was sent
    history = [(m.role, m.content) for m in home.sessions().read_messages(OWNER_KEY)]
    assert history[-2:] == [
        ("user", "What is on my calendar today?"),
        ("assistant", "Dentist at 15:00, nothing else."),
    ]


def test_a_garbage_model_answer_gets_a_clear_reply_and_the_prompt_is_kept(
    home: Home, gateways: Callable[[Home], GatewayProcess]
) -> None:
    from vikingbot.testing.fake_llm import garbage

    home.add_user_session()

    def answer(req: RecordedRequest) -> Step | None:
        if req.last_user_text == "Anything new?":
            return garbage("<html>502 Bad Gateway</html>")
        return None

    home.llm.responder = answer
    gw = gateways(home)
    home.telegram.push_text(chat_id=OWNER_ID, user_id=OWNER_ID, text="Anything new?")
    [sent] = home.telegram.wait_for_sent(1, timeout=60)
    assert sent["text"].startswith("Sorry, that failed: the openai endpoint")
    assert "not a valid response" in sent["text"]
    assert gw.stop() == 0
    history = [(m.role, m.content) for m in home.sessions().read_messages(OWNER_KEY)]
    assert history[-1] == ("user", "Anything new?")
