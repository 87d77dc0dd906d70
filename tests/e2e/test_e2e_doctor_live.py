"""`doctor --live` with a gateway running, and the session it leaves (issue 30).

The live call goes through the running gateway, so the key tested is the
gateway's, not this shell's; without a gateway it is made here, as before. The
session it makes is the doctor's own: no listing shows it as one of the user's
chats, and it gives no workspace a chat.
"""

from __future__ import annotations

import json

import pytest

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home
from vikingbot.testing.fake_openai import FakeOpenAI, reply

GATEWAY_KEY = "sk-gateway-doctor"


def agent_row(home: Home, *args: str) -> dict[str, str]:
    out = home.cli("doctor", *args, "--json").stdout
    return next(c for c in json.loads(out)["checks"] if c["name"] == "agent")


def test_doctor_live_calls_through_the_running_gateway_with_its_key(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAI.start(require_key=GATEWAY_KEY) as llm:
        llm.default = reply("OK")
        home.write_config(providers={"openai": {"api_base": llm.base_url, "max_retries": 0}})
        with GatewayProcess(home.path, env={"OPENAI_API_KEY": GATEWAY_KEY}) as gw:
            monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-in-this-shell")
            row = agent_row(home, "--live")
            assert row["status"] == "ok", row
            assert f"live call through the running gateway (pid {gw.proc.pid}" in row["message"]  # type: ignore[union-attr]
            assert row["message"].endswith("answered 'OK'")
            assert llm.requests[-1].headers.get("authorization") == f"Bearer {GATEWAY_KEY}"
        calls = len(llm.requests)
        row = agent_row(home, "--live")  # no gateway: this shell's wrong key is tested
        assert row["status"] == "fail" and "gateway" not in row["message"], row
        assert "live call failed" in row["message"]
        assert len(llm.requests) == calls + 1
        assert llm.requests[-1].headers.get("authorization") == "Bearer sk-wrong-in-this-shell"


def test_doctors_session_is_not_a_user_session(home: Home) -> None:
    """In per-session mode a chat has a workspace of its own; the doctor's call has
    none, and neither status, sessions list nor heartbeat plan shows its session."""
    home.write_config(sandbox={"mode": "per-session"})
    home.llm.default = reply("OK")
    home.add_user_session()  # the owner's chat, for contrast
    before = home.cli_json("status")
    assert (before["sessions"], before["workspaces"]) == (1, 0)
    with GatewayProcess(home.path):
        assert agent_row(home, "--live")["status"] == "ok"
    assert agent_row(home, "--live")["status"] == "ok"  # and once without the gateway
    assert len(home.llm.requests) == 2
    after = home.cli_json("status")
    assert after["sessions"] == 1
    listed = [s["key"] for s in home.cli_json("sessions", "list")["sessions"]]
    assert listed == ["telegram:default:4242"]
    plan = home.cli("heartbeat", "plan")
    assert plan.returncode == 0, plan.stderr
    assert "doctor" not in plan.stdout and "doctor" not in home.cli("heartbeat", "status").stdout
    workspaces = sorted(p.name for p in (home.data / "workspace").iterdir())
    assert not [w for w in workspaces if "doctor" in w], workspaces
