"""`vikingbot heartbeat parked --json` and `unpark` through the CLI (no gateway running)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import Cli, add_task


def test_parked_json_and_unpark(cli: Cli, shared: Path) -> None:
    add_task(
        shared, "- every: 1h title: Backup task: Copy the photos <!-- parked: failed 3 times -->"
    )
    result = cli("heartbeat", "parked", "--json")
    assert result.exit_code == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert (row["workspace"], row["entry"], row["reason"]) == ("shared", "Backup", "failed 3 times")

    missing = cli("heartbeat", "unpark", "Nope")
    assert missing.exit_code == 1 and "no parked entry 'Nope'" in missing.stderr

    result = cli("heartbeat", "unpark", "Backup", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["was"] == "failed 3 times"
    assert "parked" not in (shared / "HEARTBEAT.md").read_text("utf-8")
    assert json.loads(cli("heartbeat", "parked", "--json").stdout) == []
