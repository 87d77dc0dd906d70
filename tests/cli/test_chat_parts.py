"""The chat's pure parts: the retry line, the history file's privacy and trimming."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from vikingbot.cli.chat_input import prepare_history
from vikingbot.providers.sdk_retries import retry_line


@pytest.mark.parametrize(
    ("reason", "message", "line"),
    [
        (
            "Retrying due to status code 503",
            "Retrying request in 0.812 seconds (retry 1 of 3)",
            "the model API answered 503; retrying in 0.8 s (retry 1 of 3)",
        ),
        (
            "Encountered Exception",
            "Retrying request to /messages in 1.700000 seconds",
            "the model API could not be reached; retrying in 1.7 s",
        ),
        (
            "Encountered httpx.TimeoutException",
            "Retrying request in 2 seconds (retry 2 of 2)",
            "the model API timed out; retrying in 2.0 s (retry 2 of 2)",
        ),
        (None, "Retrying request", "the model API did not answer; retrying"),
        (
            "\x00" * 10,
            "Retrying request in nan seconds" + "x" * 10_000,
            "the model API did not answer; retrying",
        ),
    ],
)
def test_retry_line(reason: str | None, message: str, line: str) -> None:
    assert retry_line(reason, message) == line


def entries(n: int) -> str:
    return "".join(f"\n# 2026-01-01 00:00:{i:02d}.000000\n+line {i}\n" for i in range(n))


def test_history_file_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "chat_history"
    path.parent.mkdir()
    path.write_text(entries(3))
    path.chmod(0o644)
    prepare_history(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_text() == entries(3)


def test_history_keeps_the_newest_entries_once_well_over_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "chat_history"
    path.write_text(entries(25))
    prepare_history(path, keep=10)  # 25 > 2 * 10: cut to the newest 10
    kept = [ln for ln in path.read_text().splitlines() if ln.startswith("+")]
    assert kept == [f"+line {i}" for i in range(15, 25)]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    prepare_history(path, keep=10)  # 10 is not over: left alone
    assert [ln for ln in path.read_text().splitlines() if ln.startswith("+")] == kept
