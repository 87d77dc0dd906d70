"""The entry point's shortcut: `heartbeat run-now --json` sent to the gateway before Typer loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from vikingbot.cli.launch import parse_run_now, run_now_via_gateway

NONE = {"workspace": None, "force": False}


@pytest.mark.parametrize(
    ("argv", "body"),
    [
        (["heartbeat", "run-now", "--json"], NONE),
        (
            ["heartbeat", "run-now", "--json", "--entry", "Brief"],
            {"workspace": None, "force": False, "entry": "Brief"},
        ),
        (["heartbeat", "run-now", "--force", "--json"], {"workspace": None, "force": True}),
        (
            ["heartbeat", "run-now", "--json", "-w", "shared"],
            {"workspace": "shared", "force": False},
        ),
        (
            ["heartbeat", "run-now", "--workspace", "a b", "--json"],
            {"workspace": "a b", "force": False},
        ),
        (
            ["heartbeat", "run-now", "--workspace=shared", "--json"],
            {"workspace": "shared", "force": False},
        ),
        # everything else is Typer's: the table output, unknown or repeated options, globals
        (["heartbeat", "run-now"], None),
        (["heartbeat", "run-now", "--json", "--json"], None),
        (["heartbeat", "run-now", "--json", "-w"], None),
        (["heartbeat", "run-now", "--json", "-w", "--force"], None),
        (["heartbeat", "run-now", "--json", "--workspace="], None),
        (["heartbeat", "run-now", "--json", "-w", "a", "-w", "b"], None),
        (["heartbeat", "run-now", "--json", "--help"], None),
        (["heartbeat", "run-now", "--json", "extra"], None),
        (["-v", "heartbeat", "run-now", "--json"], None),
        (["--config", "x.json", "heartbeat", "run-now", "--json"], None),
        (["heartbeat", "plan", "--json"], None),
        ([], None),
        (["heartbeat"], None),
    ],
)
def test_only_the_exact_forms_take_the_shortcut(argv: list[str], body: dict | None) -> None:
    assert parse_run_now(argv) == body


def test_without_a_gateway_the_full_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIKINGBOT_HOME", str(tmp_path))
    assert run_now_via_gateway(["heartbeat", "run-now", "--json"]) is False
