"""Pure parts: names as the model sees them, results as capped text, the approval rule for
MCP tools, and the config entry."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from vikingbot.agent.approval import decide, decide_action, mcp_action
from vikingbot.config.schema import Config
from vikingbot.mcp.naming import MAX_NAME, enabled, name_tools, tool_name
from vikingbot.mcp.pins import fingerprint
from vikingbot.mcp.results import render
from vikingbot.mcp.types import McpAction
from vikingbot.redact import mask_tree

ALLOWED = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


@pytest.mark.parametrize(
    ("server", "tool", "name"),
    [
        ("time", "get_current_time", "mcp_time_get_current_time"),
        ("every", "get-tiny-image", "mcp_every_get-tiny-image"),
        ("my.server", "read file", "mcp_my_server_read_file"),
        ("gh", "créer", "mcp_gh_cr_er"),
    ],
)
def test_names_are_sanitised(server: str, tool: str, name: str) -> None:
    assert tool_name(server, tool) == name


@given(st.text(max_size=300), st.text(max_size=300))
def test_every_name_is_one_a_provider_accepts(server: str, tool: str) -> None:
    name = tool_name(server, tool)
    assert 1 <= len(name) <= MAX_NAME and set(name) <= ALLOWED and name.startswith("mcp_")


def test_long_names_keep_their_difference() -> None:
    a, b = tool_name("s", "x" * 80 + "a"), tool_name("s", "x" * 80 + "b")
    assert len(a) == len(b) == MAX_NAME and a != b


def test_two_tools_sharing_a_name_are_both_refused_naming_both() -> None:
    named, problems = name_tools([("s", "a.b"), ("s", "a b"), ("s", "ok"), ("t", "ok")])
    assert [n.name for n in named] == ["mcp_s_ok", "mcp_t_ok"]
    (problem,) = problems
    assert "'a.b'" in problem and "'a b'" in problem and "neither is offered" in problem


def test_enabled_tools_take_raw_or_wrapped_names() -> None:
    assert enabled("gh", "list", ["*"])
    assert enabled("gh", "list", ["list"]) and enabled("gh", "list", ["mcp_gh_list"])
    assert not enabled("gh", "delete", ["list", "mcp_gh_list"])


def block(**kw: object) -> SimpleNamespace:
    return SimpleNamespace(**kw)


def test_results_keep_text_and_show_binary_as_placeholders() -> None:
    content = [
        block(type="text", text="hello"),
        block(type="image", data="A" * 4000, mime_type="image/png"),
        block(type="resource_link", uri="file:///x", name="x"),
        block(type="resource", resource=block(uri="mem://a", text="inline text")),
        block(type="resource", resource=block(uri="mem://b", blob="QUJD", mime_type="app/x")),
    ]
    text = render(content)
    assert text.splitlines() == [
        "hello",
        "[image: image/png, about 3000 bytes]",
        "[resource link: file:///x x]",
        "inline text",
        "[resource: mem://b, app/x, about 3 bytes]",
    ]
    assert render([], {"a": 1}) == json.dumps({"a": 1})
    assert render([]) == "(the tool returned nothing)"


def test_results_are_capped_while_they_are_built() -> None:
    text = render([block(type="text", text="x" * 500), block(type="text", text="y")], limit=100)
    assert text == "x" * 100 + "\n[... result truncated at 100 characters]"


def action(
    server: str = "gh", identity: str = "npx gh-mcp", pinned: str | None = None
) -> McpAction:
    return McpAction(server, "list", identity, pinned)


@pytest.mark.parametrize(
    ("name", "mcp", "heartbeat", "tools", "outcome"),
    [
        # unattended: nothing is safe by default, whatever the server says
        ("mcp_gh_list", action(), {}, {}, "deny"),
        ("mcp_gh_list", action(), {"safe_tools": ["mcp_gh_list"]}, {}, "approve"),
        ("mcp_gh_list", action(), {"safe_tools": ["mcp_gh_*"]}, {}, "approve"),
        # a server named "g" never covers the tools of "gh", nor "a" those of "a_b"
        ("mcp_gh_list", action(), {"safe_tools": ["mcp_g_*"]}, {}, "deny"),
        ("mcp_a_b_list", action("a_b"), {"safe_tools": ["mcp_a_*"]}, {}, "deny"),
        (
            "mcp_gh_list",
            action(),
            {"safe_tools": ["mcp_gh_*"]},
            {"auto_deny": ["mcp_gh_*"]},
            "deny",
        ),
        ("mcp_gh_list", action(), {"safe_tools": ["mcp_*"]}, {}, "deny"),
        # approved for another program than the entry runs now
        (
            "mcp_gh_list",
            action(pinned=fingerprint("npx evil-mcp")),
            {"safe_tools": ["mcp_gh_*"]},
            {},
            "deny",
        ),
        (
            "mcp_gh_list",
            action(pinned=fingerprint("npx gh-mcp")),
            {"safe_tools": ["mcp_gh_*"]},
            {},
            "approve",
        ),
    ],
)
def test_the_unattended_rule_for_mcp_tools(
    name: str, mcp: McpAction, heartbeat: dict, tools: dict, outcome: str
) -> None:
    config = Config.model_validate({"bot": {"heartbeat": heartbeat, "tools": tools}})
    verdict = decide(config, name, read_only=True, unattended=True, mcp=mcp)
    assert verdict.outcome == outcome


def test_attended_mcp_tools_are_asked_and_named_as_the_model_sees_them() -> None:
    act = mcp_action("gh", "list", identity="npx gh-mcp")  # never read-only by default
    assert act.name == "mcp_gh_list"
    assert decide_action(Config(), act, unattended=False).outcome == "ask"
    approve = Config.model_validate({"bot": {"tools": {"auto_approve": ["mcp__gh__*"]}}})
    assert decide_action(approve, act, unattended=False).approved  # the ACP spelling too


def servers(entries: dict) -> Config:
    return Config.model_validate({"bot": {"tools": {"mcpServers": entries}}})


def test_the_config_entry_reads_nanobot_and_openviking_forms() -> None:
    cfg = servers(
        {
            "fs": {"command": "npx", "args": ["-y", "@x/fs"], "env": {"T": "${TOKEN}"}},
            "remote": {
                "url": "https://mcp.example/mcp",
                "headers": {"Authorization": "Bearer s3cr3t"},
            },
            "legacy": {"type": "sse", "url": "https://old.example/sse"},
            "typed": {"type": "streamable_http", "url": "https://x/mcp", "toolTimeoutS": 5},
        }
    ).bot.tools.mcp_servers
    assert [s.kind for s in cfg.values()] == ["stdio", "streamableHttp", "sse", "streamableHttp"]
    assert cfg["fs"].env == {"T": "${TOKEN}"}  # expanded when the server starts
    assert cfg["fs"].enabled_tools == ["*"] and cfg["fs"].tool_timeout_s == 30
    assert cfg["typed"].tool_timeout_s == 5


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"comand": "x"}, "did you mean"),
        ({"command": "x", "url": "http://y"}, "not both"),
        ({"args": ["x"]}, "needs command"),
        ({"type": "websocket", "url": "ws://x"}, "unknown MCP server type"),
    ],
)
def test_bad_entries_are_refused_clearly(entry: dict, message: str) -> None:
    from vikingbot.config.loader import describe_validation_error

    with pytest.raises(ValidationError) as err:
        servers({"bad": entry})
    text = describe_validation_error(err.value, "config.json")
    assert message in text and "mcp_servers.bad" in text


def test_secrets_in_headers_and_env_are_masked_when_shown() -> None:
    cfg = servers(
        {
            "a": {"command": "x", "env": {"GITHUB_TOKEN": "ghp_abcdef123456"}},
            "b": {"url": "https://u:pw123456@h/mcp", "headers": {"X-Key": "k-abcdef"}},
        }
    )
    shown = json.dumps(mask_tree(cfg.model_dump(mode="json", by_alias=True)))
    assert "ghp_abcdef123456" not in shown and "k-abcdef" not in shown and "pw123456" not in shown
