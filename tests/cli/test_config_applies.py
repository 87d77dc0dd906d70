"""`config set` against a running gateway returns once the gateway has applied the change
(issue 42): the key, then a chat at once; the notify channel enabled, then disabled,
inside the running gateway against a loopback push endpoint; a key read only at start
refused with "restart the gateway to apply" and flagged by `doctor`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Cli
from tests.support.gateway_proc import GatewayProcess
from tests.support.ports import free_port
from tests.support.push_endpoint import PushEndpoint
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call


def _notify_row(gw: GatewayProcess) -> dict[str, object]:
    rows = gw.get("/health")["channels"]
    return next((r for r in rows if r["name"] == "notify"), {})


def test_config_set_applies_in_the_running_gateway(cli: Cli, home: Path) -> None:
    with FakeOpenAI.start(require_key="sk-test") as llm, PushEndpoint.serving() as push:
        home.mkdir(parents=True)
        bot = {
            "agents": {"provider": "openai", "model": "gpt-x"},
            "heartbeat": {"enabled": False, "timezone": "UTC"},
            "tools": {"autoApprove": ["message"]},
            "channels": {"cli": {"enabled": False}},
        }
        (home / "config.json").write_text(json.dumps({"bot": bot}), encoding="utf-8")
        with GatewayProcess(home) as gw:
            assert gw.get("/health")["agent"]["ready"] is False

            # the key, then a chat at once: no "it needs an API key"
            section = json.dumps({"apiKey": "sk-test", "apiBase": llm.base_url})
            done = cli("config", "set", "bot.providers.openai", section)
            assert done.exit_code == 0, done.output
            assert "applied by the running gateway" in done.output
            llm.script([reply("pong")])
            chat = cli("chat", "-m", "ping")
            assert chat.exit_code == 0, chat.output
            assert "pong" in chat.stdout

            # notify: targets, then enabled: started inside the gateway, a push arrives
            targets = json.dumps({"phone": push.url("phone")})
            assert cli("config", "set", "bot.channels.notify.targets", targets).exit_code == 0
            assert cli("config", "set", "bot.channels.notify.spacingS", "0").exit_code == 0
            on = cli("config", "set", "bot.channels.notify.enabled", "true")
            assert on.exit_code == 0, on.output
            assert "channel notify started" in on.output
            assert _notify_row(gw)["running"] is True
            llm.script([tool_call("message", {"text": "to the phone", "target": "notify:phone"})])
            llm.then(reply("sent"))
            assert cli("chat", "-m", "push it").exit_code == 0
            assert [p.message for p in push.wait_received(1)] == ["to the phone"]

            # disabled: stopped inside the gateway; nothing more reaches the endpoint
            off = cli("config", "set", "bot.channels.notify.enabled", "false")
            assert off.exit_code == 0, off.output
            assert "channel notify stopped" in off.output
            assert _notify_row(gw)["running"] is False
            llm.script([tool_call("message", {"text": "again", "target": "notify:phone"})])
            llm.then(reply("tried"))
            assert cli("chat", "-m", "push it again").exit_code == 0
            assert len(push.received) == 1

            # a key read only at start: saved for the next start, refused live, flagged
            port = str(free_port())
            moved = cli("config", "set", "bot.gateway.port", port)
            assert moved.exit_code == 1
            assert "restart the gateway to apply" in moved.output
            doctor = cli("doctor")
            assert "bot.gateway.port" in doctor.stdout
            assert "restart the gateway to apply" in doctor.stdout
            status = cli("channels", "status")
            assert (
                "bot.gateway.port: in the config, not running: restart the gateway to apply"
                in status.output
            )
            assert json.loads((home / "config.json").read_text())["bot"]["gateway"]["port"] == (
                int(port)
            )
        out = gw.output
    assert "✗ Agent: " in out and "✓ Agent: ready" in out
    assert "↻ Channel notify: started" in out and "↻ Channel notify: stopped" in out
