"""Signal and WhatsApp with two real gateway processes on one home and PostgreSQL schema.

signal-cli's daemon streams every event to each client, so only the gateway holding
the channel's lease follows the stream: one stream is open, and a message is
answered once. Meta may post one WhatsApp webhook to either gateway (behind a load
balancer) and again after a timeout: the first to claim its message id answers it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import SharedDb
from tests.support.fake_signal import BOT, FakeSignal
from tests.support.fake_whatsapp import APP_SECRET, PHONE_ID, TOKEN, VERIFY, FakeWhatsApp
from tests.support.gateway_proc import both_started, write_shared_home
from tests.support.home import poll
from vikingbot.testing.fake_openai import FakeOpenAI

ALICE = "+4915100000002"
WA_ALICE = "4915100000002"
SIGNAL_KEY = "signal:default"


@pytest.fixture
def home(
    pg_schema: SharedDb, tmp_path: Path
) -> Iterator[tuple[Path, FakeSignal, FakeWhatsApp, FakeOpenAI]]:
    signal, whatsapp = FakeSignal(), FakeWhatsApp()
    with FakeOpenAI.start() as llm, signal.serve() as daemon, whatsapp.serve() as graph:
        llm.script(["Noted."] * 4)
        channels = {
            "signal": {"enabled": True, "url": daemon, "account": BOT, "allow_from": [ALICE]},
            "whatsapp": {
                "enabled": True,
                "api_base": graph,
                "phone_number_id": PHONE_ID,
                "access_token": TOKEN,
                "app_secret": APP_SECRET,
                "verify_token": VERIFY,
                "allow_from": ["+" + WA_ALICE],
            },
        }
        path = write_shared_home(
            tmp_path / "home",
            pg_schema.config_url,
            llm_url=llm.base_url,
            channels=channels,
            heartbeat={"enabled": False},
            gateway={"shutdown_grace_s": 2, "lease_s": 3},
        )
        yield path, signal, whatsapp, llm


def test_one_gateway_follows_signal_and_a_whatsapp_post_to_both_is_answered_once(
    home: tuple[Path, FakeSignal, FakeWhatsApp, FakeOpenAI],
) -> None:
    path, signal, whatsapp, llm = home
    with both_started(path) as (a, b):
        poll(
            lambda: any(SIGNAL_KEY in p["channels"] for p in a.get("/health")["gateways"]),
            "a gateway holding the Signal lease",
            30,
        )
        poll(lambda: signal.streams, "the holder's event stream", 30)
        signal.push_text("remember the milk")
        poll(lambda: signal.sent, "the Signal answer", 30)

        for gw in (a, b):  # the same webhook reaches both gateways
            answer = whatsapp.post_text(
                f"{gw.base_url}/whatsapp/webhook", WA_ALICE, "and the eggs", message_id="wamid.X"
            )
            assert answer.status_code == 200
        poll(lambda: whatsapp.sent, "the WhatsApp answer", 30)
        # a third message on each platform, to be sure nothing else was still coming
        signal.push_text("thanks")
        whatsapp.post_text(f"{b.base_url}/whatsapp/webhook", WA_ALICE, "bye")
        poll(lambda: len(signal.sent) >= 2 and len(whatsapp.sent) >= 2, "the last answers", 30)
    assert [m["message"] for m in signal.sent] == ["Noted.", "Noted."]
    assert [m["text"]["body"] for m in whatsapp.sent] == ["Noted.", "Noted."]
    assert sorted(r.last_user_text for r in llm.requests) == sorted(
        ["remember the milk", "and the eggs", "thanks", "bye"]
    )
    assert signal.most_streams == 1  # never two gateways following the stream
    assert signal.receipts and signal.typing  # read, and "typing" while the turn ran
