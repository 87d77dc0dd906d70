"""The email channel's trust matrix against a real Dovecot.

    uv run --all-extras --dev python bench/email_trust.py

Delivers the From-header tricks and forged verdicts of tests/support/mailtricks.py
(from a stranger posing as the owner), then a poison mail (1,000 nested multipart parts)
and 200 unread strangers' mails, each followed by one of the owner's; prints how many
tricks reached the agent (target 0) and how long the owner's mail took to reach it
after each (target: within one poll/IDLE wake-up).
"""

from __future__ import annotations

import asyncio
import shutil
import smtplib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.channels.test_mail_trust import nested_multipart
from tests.support import mailtricks
from tests.support.mailrig import BOT, OWNER, STRANGER, MailRig, vouched
from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.config.schema import Config
from vikingbot.store.db import StateStore


async def until(bus: MessageBus, subject: str, seen: list[InboundMessage]) -> float:
    began = time.monotonic()
    while True:
        msg = await asyncio.wait_for(bus.next_inbound(), 60)
        seen.append(msg)
        if msg.metadata.get("subject") == subject:
            return time.monotonic() - began


async def main() -> None:
    with MailRig.started() as rig, tempfile.TemporaryDirectory() as tmp:
        store = StateStore.open(f"sqlite:///{Path(tmp) / 'state.db'}")
        channels = {"cli": {"enabled": False}, "email": rig.section()}
        config = Config.model_validate({"bot": {"channels": channels}})
        bus = MessageBus()
        manager = ChannelManager(config, bus=bus, store=store)
        await manager.start()
        seen: list[InboundMessage] = []
        try:
            tricks = mailtricks.FROM_TRICKS + mailtricks.VERDICT_TRICKS
            for n, trick in enumerate(tricks):
                raw = mailtricks.mail(trick, f"Trick t{n}")
                rig.raw_to_bot(raw, STRANGER, server=trick.server)
            rig.mail_to_bot(OWNER, "Owner after tricks", "hi")
            await until(bus, "Owner after tricks", seen)
            reached = [m for m in seen if str(m.metadata.get("subject", "")).startswith("Trick")]
            refusals = store.audit_events(limit=1000, action="inbound.refuse")
            print(f"tricks tried: {len(tricks)} ({len(mailtricks.FROM_TRICKS)} From, "
                  f"{len(mailtricks.VERDICT_TRICKS)} forged/foreign verdicts)")  # fmt: skip
            print(f"stranger mails that reached the agent: {len(reached)}")
            print(f"refusal audit records (one per sender per 10 min): {len(refusals)}")

            rig.raw_to_bot(nested_multipart(1000, subject="Poison"))
            began = time.monotonic()
            rig.mail_to_bot(OWNER, "Owner after poison", "still there?")
            await until(bus, "Owner after poison", seen)
            print(f"owner's mail after a 1,000-deep poison mail: answered in "
                  f"{time.monotonic() - began:.2f} s (IDLE)")  # fmt: skip

            with smtplib.LMTP("127.0.0.1", rig.dovecot.lmtp_port) as lmtp:
                for n in range(200):
                    raw = f"From: {STRANGER}\r\nSubject: News n{n}\r\n\r\nbuy\r\n".encode()
                    lmtp.sendmail(STRANGER, [BOT], vouched(raw))
            began = time.monotonic()
            rig.mail_to_bot(OWNER, "Owner after 200 strangers", "hello")
            await until(bus, "Owner after 200 strangers", seen)
            print(f"owner's mail after 200 unread strangers: answered in "
                  f"{time.monotonic() - began:.2f} s (IDLE)")  # fmt: skip
            health = next(r for r in manager.status() if r["name"] == "email")
            print(f"channel failing: {health['failing']}")
        finally:
            await manager.stop()
            store.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
