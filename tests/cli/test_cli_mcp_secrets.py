"""Secrets in an MCP server's arguments and URL path are masked wherever shown, and a
server name with a dot can be added."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.cli import Cli
from vikingbot.redact import mask_command, mask_identity, secret_args, secret_path_parts

KEY = "sk-live-0123456789abcdefXYZ"
PATH_KEY = "Zq81pXv0aB3kL9mN2oP4rS6t"


@pytest.mark.parametrize(
    ("args", "secrets"),
    [
        (["--api-key", KEY, "--port", "80"], {KEY}),
        (["--api-key=" + KEY], {KEY}),
        (["-token", "abc123456"], {"abc123456"}),
        (["--password", "--verbose"], set()),
        (["--client-secret", "s3cr3t", "--db-pass", "x"], {"s3cr3t"}),
        (["--workspace", "w1"], set()),
    ],
)
def test_secret_args_are_found_after_a_flag_naming_one(args: list[str], secrets: set[str]) -> None:
    assert secret_args(args) == secrets
    shown = " ".join(mask_command(args))
    assert not any(s in shown for s in secrets)


def test_an_entry_marks_more_flags_and_url_path_keys_are_found() -> None:
    assert mask_command(["--workspace", "w1"], ["--workspace"]) == ["--workspace", "***"]
    assert secret_path_parts(f"https://mcp.example/sse/{PATH_KEY}/x?y=1") == {PATH_KEY}
    assert secret_path_parts("https://mcp.example/api/v1/streamable-http-endpoint") == set()
    shown = mask_identity(f"streamableHttp https://mcp.example/{PATH_KEY}/mcp")
    assert PATH_KEY not in shown and "mcp.example" in shown


@given(st.lists(st.text(max_size=30), max_size=8))
def test_masking_a_command_line_is_total(args: list[str]) -> None:
    assert len(mask_command(args)) == len(args)


def test_config_show_and_mcp_list_mask_arg_and_path_secrets(cli: Cli, home: Path) -> None:
    added = cli("mcp", "add", "a.b", "--", "npx", "srv", "--api-key", KEY)
    assert added.exit_code == 0, added.output
    web = cli("mcp", "add", "web", "--url", f"https://mcp.example/{PATH_KEY}/mcp")
    assert web.exit_code == 0, web.output
    raw = json.loads((home / "config.json").read_text())
    assert raw["bot"]["tools"]["mcp_servers"]["a.b"]["args"] == ["srv", "--api-key", KEY]
    for shown in (
        cli("mcp", "list", "--json").stdout,
        cli("mcp", "list").stdout,
        cli("config", "get", "bot.tools.mcp_servers").stdout,
        cli("config", "show").stdout,
    ):
        assert KEY not in shown and PATH_KEY not in shown, shown
    listed = json.loads(cli("mcp", "list", "--json").stdout)
    assert [s["name"] for s in listed["servers"]] == ["a.b", "web"]
