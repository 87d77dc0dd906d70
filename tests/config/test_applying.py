"""The pure halves of "every config change is applied or says why not" (issue 42):
which channels a change starts, stops or restarts; which keys wait for a restart; what
`config set` prints for the gateway's answer; the did-you-mean of an unknown key."""

from __future__ import annotations

from typing import Any

import pytest

from vikingbot.channels.reconcile import Step, plan
from vikingbot.cli.config_apply import verdict
from vikingbot.config.edit import canonical_key
from vikingbot.config.loader import to_field_names
from vikingbot.config.schema import Config
from vikingbot.errors import ConfigError
from vikingbot.gateway.applying import needs_restart, waiting_for_restart


def config(**bot: Any) -> Config:
    return Config.model_validate(to_field_names({"bot": bot}, Config))


PHONE = {"phone": "ntfy://127.0.0.1:9/phone"}
ON = {"notify": {"enabled": True, "targets": PHONE}}


@pytest.mark.parametrize(
    ("old", "new", "running", "steps"),
    [
        ({}, {}, set(), []),
        ({}, ON, set(), [Step("notify", "start")]),
        (ON, {}, {"notify"}, [Step("notify", "stop")]),
        (
            ON,
            {"notify": {"enabled": False, "targets": PHONE}},
            {"notify"},
            [Step("notify", "stop")],
        ),
        (ON, ON, {"notify"}, []),
        (ON, {"notify": {**ON["notify"], "title": "t"}}, {"notify"}, [Step("notify", "restart")]),
        # enabled but down (it failed to start): a changed section starts it again
        (ON, {"notify": {**ON["notify"], "title": "t"}}, set(), [Step("notify", "start")]),
        ({"notify": {"enabled": False}}, {"notify": {"enabled": False, "title": "x"}}, set(), []),
    ],
)
def test_plan_of_channel_changes(
    old: dict[str, Any], new: dict[str, Any], running: set[str], steps: list[Step]
) -> None:
    assert plan(config(channels=old), config(channels=new), frozenset(running)) == steps


def test_a_new_owner_chat_restarts_the_channel_it_is_on() -> None:
    old = config(channels=ON)
    new = config(channels=ON, owner="notify:phone")
    assert plan(old, new, frozenset({"notify"})) == [Step("notify", "restart")]


def test_keys_read_at_start_need_a_restart_and_others_do_not() -> None:
    base = config()
    assert needs_restart(base, config(heartbeat={"intervalSeconds": 60}, channels=ON)) == []
    assert needs_restart(base, config(gateway={"port": 9999}, agents={"loop": "acp"})) == [
        "bot.gateway.port",
        "bot.agents.loop",
    ]
    waiting = ["bot.gateway.port", "storage.database_url"]
    assert waiting_for_restart("bot.gateway.port", waiting) == ["bot.gateway.port"]
    assert waiting_for_restart("bot.gateway", waiting) == ["bot.gateway.port"]  # the section
    assert waiting_for_restart("storage.databaseUrl", waiting) == ["storage.database_url"]
    assert waiting_for_restart("bot.heartbeat.enabled", waiting) == []


@pytest.mark.parametrize(
    ("key", "report", "ok", "lines"),
    [
        ("bot.heartbeat.enabled", {}, True, ["applied by the running gateway (pid 7)"]),
        (
            "bot.channels.notify.enabled",
            {"channels": [{"channel": "notify", "action": "start", "ok": True, "error": None}]},
            True,
            ["applied by the running gateway (pid 7)", "channel notify started"],
        ),
        (
            "bot.channels.telegram",
            {"channels": [{"channel": "telegram", "action": "start", "ok": False, "error": "401"}]},
            False,
            ["channel telegram did not start: 401"],
        ),
        (
            "bot.gateway.port",
            {"restart_needed": ["bot.gateway.port"]},
            False,
            [
                "the running gateway (pid 7) reads bot.gateway.port only when it starts: "
                "restart the gateway to apply"
            ],
        ),
        # an earlier key waits for a restart; this one applied
        ("bot.heartbeat.enabled", {"restart_needed": ["bot.gateway.port"]}, True, None),
        (
            "bot.heartbeat.enabled",
            {"error": "bad .env"},
            False,
            ["the running gateway (pid 7) did not apply it: bad .env"],
        ),
    ],
)
def test_what_config_set_says_of_the_gateways_answer(
    key: str, report: dict[str, Any], ok: bool, lines: list[str] | None
) -> None:
    got_ok, got_lines = verdict(key, report, 7)
    assert got_ok is ok
    if lines is not None:
        assert got_lines == lines


def test_an_unknown_key_gets_a_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"did you mean bot\.heartbeat\.interval_seconds\?"):
        canonical_key("bot.heartbeat.interval")
    assert canonical_key("bot.heartbeat.activeHours.start") == "bot.heartbeat.active_hours.start"
    assert canonical_key("bot.providers.openai.apiKey") == "bot.providers.openai.apiKey"
    assert canonical_key("bot.channels.notify.enabled") == "bot.channels.notify.enabled"


def test_the_first_config_file_writes_durations_as_the_readme_does() -> None:
    from vikingbot.config.loader import default_file_data
    from vikingbot.grammar import duration_text

    data = default_file_data()
    heartbeat = data["bot"]["heartbeat"]
    assert (heartbeat["stale_after"], heartbeat["missed_grace"]) == ("2d", "3h")
    assert heartbeat["task_timeout_s"] == 1800 and isinstance(heartbeat["task_timeout_s"], int)
    assert Config.model_validate(to_field_names(data, Config)) == Config()  # the same config
    assert [duration_text(s) for s in (90, 600, 5400, 86400, 0.5, 0)] == [
        "90s",
        "10m",
        "90m",
        "1d",
        None,
        "0s",
    ]
