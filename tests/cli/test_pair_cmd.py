"""`vikingbot pair` without a gateway: the code a stranger got is listed, approving it adds
them to the channel's allow_from in the config file, and a code is taken once."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vikingbot.commands.pairing import PairingBook


def test_pair_list_approve_and_deny(cli: Callable[..., Any], home: Path) -> None:
    home.mkdir(parents=True)
    config = home / "config.json"
    section = {"enabled": True, "token": "1:x", "allowFrom": ["42"], "pairing": True}
    config.write_text(json.dumps({"bot": {"channels": {"telegram": section}}}))
    book = PairingBook(home / "data" / "pairing.json")
    now = datetime.now(UTC)
    _, eve = book.request("telegram", "777", "777", now)
    _, mallory = book.request("telegram", "666", "666", now)
    assert eve is not None and mallory is not None

    listed = cli("pair", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    assert {r["sender_id"] for r in json.loads(listed.stdout)} == {"777", "666"}

    ok = cli("pair", "approve", eve.code.lower())
    assert ok.exit_code == 0, ok.stderr
    assert "telegram:777 added to allow_from (applied when the gateway starts)" in ok.stdout
    saved = json.loads(config.read_text())["bot"]["channels"]["telegram"]
    assert saved["allowFrom"] == ["42", "777"] and saved["token"] == "1:x"

    again = cli("pair", "approve", eve.code)
    assert again.exit_code == 1 and "unknown or expired" in again.stderr
    assert cli("pair", "deny", mallory.code).exit_code == 0
    assert json.loads(cli("pair", "list", "--json").stdout) == []
    assert json.loads(config.read_text())["bot"]["channels"]["telegram"]["allowFrom"] == [
        "42",
        "777",
    ]
