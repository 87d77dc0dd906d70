"""`vikingbot doctor --live` sends a test message on the email and notify channels."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.support.mailrig import OWNER, MailRig
from tests.support.push_endpoint import PushEndpoint
from vikingbot.testing.fake_openai import FakeOpenAI, reply


@pytest.fixture(scope="module")
def rig() -> Iterator[MailRig]:
    with MailRig.started() as started:
        yield started


def _config(home: Path, llm: FakeOpenAI, channels: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    bot = {
        "agents": {"provider": "openai", "model": "gpt-x"},
        "providers": {"openai": {"apiKey": "sk-t", "apiBase": llm.base_url}},
        "heartbeat": {"timezone": "UTC"},
        "owner": f"email:{OWNER}",
        "channels": {"cli": {"enabled": False}, **channels},
    }
    path = home / "config.json"
    path.write_text(json.dumps({"bot": bot}), encoding="utf-8")
    path.chmod(0o600)


def _line(stdout: str, name: str) -> str:
    (found,) = [line for line in stdout.splitlines() if f" channel {name} " in line]
    return " ".join(found.split())


def test_live_sends_a_test_mail_and_a_test_push(cli: Cli, home: Path, rig: MailRig) -> None:
    with PushEndpoint.serving() as push, FakeOpenAI.start() as llm:
        llm.script([reply("OK")])
        notify = {"enabled": True, "targets": {"phone": push.url("phone")}, "spacingS": 0}
        _config(home, llm, {"email": rig.section(ownerChat=OWNER), "notify": notify})
        result = cli("doctor", "--live")
        pushed = push.wait_received(1)
    assert _line(result.stdout, "email") == (
        f"! channel email test mail sent to {OWNER}; IMAP login to 127.0.0.1 works; "
        "a connection without TLS: use it only on loopback"
    )
    assert _line(result.stdout, "notify") == "✓ channel notify test push sent to phone"
    assert "doctor --live" in pushed[0].message
    mails = [m for m in rig.inbox(OWNER) if "doctor --live" in str(m.get_body(("plain",)))]
    assert len(mails) == 1


def test_live_says_what_failed(cli: Cli, home: Path, rig: MailRig) -> None:
    with PushEndpoint.serving() as push, FakeOpenAI.start() as llm:
        llm.script([reply("OK")])
        push.answers.extend([500])
        notify = {"enabled": True, "targets": {"phone": push.url("phone")}, "spacingS": 0}
        _config(
            home, llm, {"email": rig.section(password="wrong", ownerChat=OWNER), "notify": notify}
        )
        result = cli("doctor", "--live")
    assert result.exit_code == 1
    email = _line(result.stdout, "email")
    assert email.startswith("✗ channel email SMTP 127.0.0.1 to owner@")
    assert "SMTPAuthenticationError" in email and "wrong" not in email.split("owner@")[1]
    assert _line(result.stdout, "notify").startswith(
        "✗ channel notify notify: push to phone failed:"
    )
