"""Webhook messages across a SIGKILL: every message answered 202 gets exactly one reply.

A real gateway takes a burst of webhook messages while the model holds every chat
answer back, so nothing is answered yet; it is SIGKILLed in the middle of the
burst. The restarted gateway answers what the first one accepted (kept in the
state database before the 202), each once.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll
from vikingbot.testing.fake_llm import RecordedRequest, Step, reply

TOKEN = "e2e-inbound-token"


class Receiver:
    """The webhook's outbound URL on loopback: records every reply the gateway POSTs."""

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with outer._lock:
                    outer.replies.append(json.loads(body or b"{}"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"

    def texts(self) -> Counter[str]:
        with self._lock:
            return Counter(str(r.get("text")) for r in self.replies)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()


def post(gw: GatewayProcess, n: int) -> bool:
    """POST chat message ``n``; True when the gateway answered 202 (accepted)."""
    body = json.dumps({"sender_id": "u1", "chat_id": f"c{n % 4}", "text": f"chat {n}"})
    request = urllib.request.Request(
        gw.base_url + "/webhook/inbound",
        data=body.encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return bool(response.status == 202)
    except (urllib.error.URLError, OSError):
        return False


def test_accepted_webhook_messages_are_answered_once_after_a_sigkill(
    home: Home, gateways: Callable[[Home], GatewayProcess], receiver: Receiver
) -> None:
    holding = threading.Event()
    holding.set()

    def answer(request: RecordedRequest) -> Step | None:
        text = request.last_user_text or ""
        if not text.startswith("chat "):
            return None
        # while holding, the first gateway's turns are all still waiting at the kill
        return reply(f"echo {text}", delay_s=300 if holding.is_set() else 0)

    home.llm.responder = answer
    home.write_config(
        channels={
            "webhook": {
                "enabled": True,
                "outbound_urls": [receiver.url],
                "inbound_token": TOKEN,
                "allow_from": ["*"],
            }
        },
        heartbeat={"timezone": "UTC", "enabled": False},
    )
    first = gateways(home)
    accepted: list[int] = []
    refused: list[int] = []
    killed = threading.Event()

    def burst() -> None:  # keeps posting until a post fails after the kill
        n = 0
        while True:
            ok = post(first, n)
            (accepted if ok else refused).append(n)
            n += 1
            if killed.is_set() and not ok:
                return

    poster = threading.Thread(target=burst)
    poster.start()
    poll(lambda: len(accepted) >= 20, "20 webhook messages accepted")
    poll(lambda: home.llm.requests, "a chat turn waiting for the model")
    first.kill()  # SIGKILL, in the middle of the burst
    killed.set()
    poster.join(timeout=60)
    assert not poster.is_alive()
    assert receiver.replies == []  # the first gateway answered nothing before it died

    holding.clear()
    second = gateways(home)
    want = {f"echo chat {n}" for n in accepted}
    poll(lambda: want <= set(receiver.texts()), "a reply to every accepted message", 120)
    assert second.stop() == 0
    replies = receiver.texts()
    assert {text: replies[text] for text in want} == dict.fromkeys(want, 1)
    assert all(count == 1 for count in replies.values())  # nothing answered twice
    poll(
        lambda: "answering" in home.log_text() and "a previous run left" in home.log_text(),
        "the restart's 'a previous run left ... answering' line in the gateway's log",
    )
    # every kept message was marked answered once its reply was with delivery
    from vikingbot.channels.inbound import InboundStore
    from vikingbot.store.db import StateStore

    with StateStore.open(home.database_url) as store:
        kept = InboundStore(store).counts("webhook")
    assert set(kept) == {"answered"}  # nothing left pending
    # one post is in flight at a time: the message kept just before the kill may have lost
    # its 202 on the way (the poster counted it refused); it is answered all the same
    assert len(accepted) <= kept["answered"] <= len(accepted) + 1
