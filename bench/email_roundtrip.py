"""Email: from a mail landing in the bot's mailbox to the reply landing in the sender's.

A real `vikingbot gateway` process (the email channel, a scripted model that answers
at once) against a real Dovecot (IMAP + LMTP) and an SMTP server (aiosmtpd) that
hands each mail to Dovecot (`tests/support/mailrig.py`). The clock starts when LMTP
has put the mail into the bot's INBOX and stops when the reply is in the sender's
INBOX (the relay records it after Dovecot took it). Median and spread of N mails,
with IDLE and with polling (`idle: false`, `pollS` as printed). Each mail is sent
right after the previous answer, that is right after the channel looked: a polled
mail here waits almost a whole interval (the worst case; at a random time, half).
Baseline, in the same run: the mail system alone (the same LMTP delivery, then an
SMTP reply sent at once by this script).

    uv run --dev python bench/email_roundtrip.py [--mails 20] [--poll-s 5]
"""

from __future__ import annotations

import argparse
import smtplib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home
from tests.support.mailrig import BOT, FRIEND, OWNER, MailRig, vouched
from vikingbot.testing.fake_openai import FakeOpenAI, reply


def wait_replies(rig: MailRig, count: int, timeout: float = 120.0) -> None:
    with rig.relay.cond:
        if not rig.relay.cond.wait_for(lambda: len(rig.relay.received) >= count, timeout):
            raise SystemExit(f"no reply within {timeout:g}s ({len(rig.relay.received)} mails)")


def timed(rig: MailRig, mails: int, send_reply: Callable[[], None] | None = None) -> list[float]:
    out = []
    for n in range(mails):
        before = len(rig.relay.received)
        question = f"From: {OWNER}\r\nSubject: Question {n}\r\n\r\nIs the build green?\r\n"
        # the baseline's questions go to another mailbox: the bot must not answer them later
        raw = vouched(question.encode())  # the receiving server's verdict on top
        rig.dovecot.deliver(raw, BOT if send_reply is None else FRIEND, OWNER)
        start = time.perf_counter()
        if send_reply is not None:
            send_reply()
        wait_replies(rig, before + 1)
        out.append(time.perf_counter() - start)
    return out


def bare_reply(rig: MailRig) -> None:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = BOT, OWNER, "Re: question"
    msg.set_content("Yes.")
    with smtplib.SMTP("127.0.0.1", rig.relay.port, local_hostname="example.test") as smtp:
        smtp.login(BOT, rig.dovecot.password)
        smtp.send_message(msg)


def with_gateway(root: Path, rig: MailRig, mails: int, **email: object) -> list[float]:
    with FakeOpenAI.start(default=reply("Yes, it is green.")) as llm:
        telegram = FakeTelegram()
        with telegram.serve() as api:
            home = Home(root, llm, telegram, api)
            home.write_config(
                owner=f"email:{OWNER}",
                channels={"telegram": {"enabled": False}, "email": rig.section(**email)},
                heartbeat={"enabled": False, "timezone": "UTC"},
            )
            gw = GatewayProcess(home.path, start_timeout_s=60).start()
            try:
                timed(rig, 1)  # warm: the channel connected, the SDKs imported
                return timed(rig, mails)
            finally:
                gw.stop()


def line(name: str, runs: list[float]) -> str:
    ranked = sorted(runs)
    p10, p90 = ranked[int(0.1 * (len(ranked) - 1))], ranked[int(0.9 * (len(ranked) - 1))]
    return (
        f"{name:<40} {statistics.median(runs) * 1000:>9.0f} {p10 * 1000:>8.0f} "
        f"{p90 * 1000:>8.0f} {max(runs) * 1000:>8.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mails", type=int, default=20)
    parser.add_argument("--poll-s", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, MailRig.started() as rig:
        base = timed(rig, args.mails, lambda: bare_reply(rig))
        idle = with_gateway(Path(tmp) / "idle", rig, args.mails)
        polled = with_gateway(Path(tmp) / "poll", rig, args.mails, idle=False, pollS=args.poll_s)
    print(
        f"{args.mails} mails each; ms from landing in the bot's INBOX to the reply in the sender's"
    )
    print(f"{'':<40} {'median':>9} {'p10':>8} {'p90':>8} {'max':>8}")
    print(line("baseline: the mail system alone", base))
    print(line("gateway, IMAP IDLE", idle))
    print(line(f"gateway, polling every {args.poll_s:g} s", polled))


if __name__ == "__main__":
    main()
