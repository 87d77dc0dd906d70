"""Signal and WhatsApp: messages answered once while one of two gateways is killed (issue 48).

    uv run --all-extras --dev python bench/messengers_failover.py [--messages N] [--pg-url URL]

Two real `vikingbot gateway` processes share one home and a fresh PostgreSQL schema,
with the Signal channel on a fake signal-cli daemon and the WhatsApp channel on a
fake Graph API (tests/support/fake_signal.py, fake_whatsapp.py), the scripted model
answering every chat turn after 0.3 s. N people (default 200, one number each) each
send one message on each platform, 20 a second:

- Signal: the daemon streams to the gateway holding the channel's lease; halfway
  through, that gateway is SIGKILLed, with turns in flight.
- WhatsApp: the posts alternate between the two gateways, as a load balancer would
  send them, so the same kill stops half of them from answering. A post the killed
  gateway can no longer take (connection refused) is posted to the other, as Meta
  redelivers a webhook that was not acknowledged.

Prints, per platform: messages sent, answered once, answered twice (the documented
window: a reply on the wire at the kill, Signal and WhatsApp having no idempotency
key), never answered (target 0), and seconds from the kill to the last answer (a
dead gateway's kept messages are taken over once it is seen dead, about 30 s, then
at the survivor's next look, every 30 s).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.databases import SharedDb
from tests.support.fake_signal import BOT, FakeSignal
from tests.support.fake_whatsapp import APP_SECRET, PHONE_ID, TOKEN, VERIFY, FakeWhatsApp
from tests.support.gateway_proc import GatewayProcess, both_started, write_shared_home
from vikingbot.testing.fake_openai import FakeOpenAI, reply

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
RATE = 20.0  # messages a second
WAIT_S = 240.0  # for the last answers


def holder(gws: tuple[GatewayProcess, GatewayProcess]) -> GatewayProcess:
    for gw in gws:
        for peer in gw.get("/health")["gateways"]:
            if peer["state"] == "running" and "signal:default" in peer["channels"]:
                return next(g for g in gws if g.get("/health")["gateway_id"] == peer["id"])
    raise RuntimeError("no gateway holds the Signal channel")


def wait(check: object, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def report(name: str, sent: int, counts: Counter[str], killed_at: float, last: float) -> None:
    once = sum(1 for n in counts.values() if n == 1)
    twice = sum(1 for n in counts.values() if n > 1)
    print(
        f"{name}: {sent} messages sent, {once} answered once, {twice} answered twice, "
        f"{sent - len(counts)} never answered (target 0); last answer "
        f"{max(last - killed_at, 0.0):.1f} s after the kill"
    )


def run(n: int, pg_url: str) -> None:
    signal, whatsapp = FakeSignal(), FakeWhatsApp()
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    db = SharedDb("postgresql", pg_url, schema)
    db.open().close()
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            FakeOpenAI.start(default=reply("Noted.", delay_s=0.3)) as llm,
            signal.serve() as daemon,
            whatsapp.serve() as graph,
        ):
            channels = {
                "signal": {"enabled": True, "url": daemon, "account": BOT, "allow_from": ["*"]},
                "whatsapp": {
                    "enabled": True,
                    "api_base": graph,
                    "phone_number_id": PHONE_ID,
                    "access_token": TOKEN,
                    "app_secret": APP_SECRET,
                    "verify_token": VERIFY,
                    "allow_from": ["*"],
                },
            }
            home = write_shared_home(
                Path(tmp) / "home",
                db.config_url,
                llm_url=llm.base_url,
                channels=channels,
                heartbeat={"enabled": False},
                gateway={"shutdown_grace_s": 2, "lease_s": 3},
            )
            with both_started(home) as gws:
                wait(lambda: signal.streams, "the Signal event stream", 60)
                first = holder(gws)
                numbers = [f"+49151{i:07d}" for i in range(n)]

                def post_whatsapp(i: int, number: str) -> None:
                    targets = [gws[i % 2], gws[(i + 1) % 2]]
                    for gw in targets:  # refused by a dead gateway: Meta redelivers
                        try:
                            if (
                                whatsapp.post_text(
                                    f"{gw.base_url}/whatsapp/webhook",
                                    number[1:],
                                    f"hi {i}",
                                    message_id=f"wamid.bench{i}",
                                ).status_code
                                == 200
                            ):
                                return
                        except httpx.HTTPError:
                            continue

                killed_at = 0.0
                posters: list[threading.Thread] = []
                for i, number in enumerate(numbers):
                    if i == n // 2:
                        first.kill()  # Signal's receiver, and one of WhatsApp's two
                        killed_at = time.monotonic()
                    signal.push_text(f"hello {i}", number=number, uuid=None)
                    thread = threading.Thread(target=post_whatsapp, args=(i, number))
                    thread.start()
                    posters.append(thread)
                    time.sleep(1 / RATE)
                for thread in posters:
                    thread.join()

                def done() -> bool:
                    got_signal = {tuple(m["recipient"]) for m in signal.sent}
                    got_whatsapp = {m["to"] for m in whatsapp.sent}
                    return len(got_signal) >= n and len(got_whatsapp) >= n

                deadline = time.monotonic() + WAIT_S
                while not done() and time.monotonic() < deadline:
                    time.sleep(0.5)
                last = time.monotonic()
            report("signal", n, Counter(m["recipient"][0] for m in signal.sent), killed_at, last)
            report("whatsapp", n, Counter("+" + m["to"] for m in whatsapp.sent), killed_at, last)
            print(f"model requests: {len(llm.requests)} for {2 * n} messages")
    finally:
        import psycopg

        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--pg-url", default=PG_URL)
    args = parser.parse_args()
    run(args.messages, args.pg_url)


if __name__ == "__main__":
    main()
