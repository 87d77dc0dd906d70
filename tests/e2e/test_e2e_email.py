"""The email channel in a running gateway, against real Dovecot and SMTP servers.

A heartbeat result arrives as mail; a mail from the owner becomes a turn whose
answer lands in the owner's mailbox in the same thread; `/health` lists the channel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll, with_tasks
from tests.support.mailrig import OWNER, MailRig
from vikingbot.testing.fake_openai import reply, tool_call

Start = Callable[[Home], GatewayProcess]


@pytest.fixture(scope="module")
def rig() -> Iterator[MailRig]:
    with MailRig.started() as started:
        yield started


def test_a_heartbeat_result_and_an_answer_arrive_as_mail(
    home: Home, gateways: Start, rig: MailRig
) -> None:
    home.write_config(
        owner=f"email:{OWNER}",
        channels={"telegram": {"enabled": False}, "email": rig.section()},
    )
    home.write_heartbeat(with_tasks("- Check whether the nightly build is green"))
    home.llm.script(
        [
            tool_call("message", {"text": "The nightly build is **red** since 02:10."}),
            "HEARTBEAT_OK",
        ]
    )
    gw = gateways(home)
    (result,) = poll(
        lambda: [m for m in rig.inbox(OWNER) if "nightly build is" in str(m["Subject"])],
        "the heartbeat result in the owner's mailbox",
    )
    assert result["Subject"] == "vikingbot: The nightly build is **red** since 02:10."
    assert "<strong>red</strong>" in str(result.get_body(("html",)).get_content())

    poll(
        lambda: [r for r in home.ledger() if r["decision"] == "run" and r["outcome"]],
        "the heartbeat run's end",
    )
    home.llm.script([reply("Noon works for me.")])
    ident = rig.mail_to_bot(OWNER, "Lunch tomorrow?", "Would noon work?")
    (answer,) = poll(
        lambda: [m for m in rig.inbox(OWNER) if m["Subject"] == "Re: Lunch tomorrow?"],
        "the answer in the owner's mailbox",
    )
    assert answer["In-Reply-To"] == ident
    assert "Noon works for me." in str(answer.get_body(("plain",)).get_content())
    asked = home.llm.requests[-1].last_user_text
    assert "Would noon work?" in asked and "Lunch tomorrow?" in asked
    health = gw.get("/health")
    assert health["services"]["channel:email:imap"]["running"]  # supervised by the gateway
    (channel,) = [c for c in health["channels"] if c["name"] == "email"]
    assert (channel["running"], channel["receiving"], channel["last_error"]) == (True, True, None)
    assert gw.stop() == 0
