"""The dashboard's Pairing page (in process, behind the real guard): the pending codes are
listed with Approve / Deny forms; a press takes the path `vikingbot pair` takes through a
gateway (``ControlOps.pair`` → ``PairingDesk``): the sender lands in the config file's
allowFrom and the step is audited. Login and the CSRF token are required as for every
dashboard form."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from starlette.testclient import TestClient

from vikingbot.clock import SystemClock
from vikingbot.commands.pairing import PairingBook
from vikingbot.config.schema import Config
from vikingbot.dashboard.app import Dashboard
from vikingbot.dashboard.auth import COOKIE
from vikingbot.dashboard.parts import DashboardParts
from vikingbot.dashboard.routes import build
from vikingbot.gateway.ops import ControlOps
from vikingbot.gateway.pairing_desk import PairingDesk
from vikingbot.store import StateStore

SECRET = "dashboard-login-secret"
UNUSED: Any = None  # parts the Pairing page never touches


@pytest.fixture
def rig(
    tmp_path: Path, _sqlite_template: Path
) -> Iterator[tuple[TestClient, str, PairingBook, StateStore, Path]]:
    shutil.copyfile(_sqlite_template, tmp_path / "state.db")
    config_file = tmp_path / "config.json"
    section = {"enabled": True, "token": "1:x", "allowFrom": ["42"], "pairing": True}
    config_file.write_text(json.dumps({"bot": {"channels": {"telegram": section}}}))
    (tmp_path / "secret").write_text(SECRET)
    book = PairingBook(tmp_path / "pairing.json")
    with StateStore.open(f"sqlite:///{tmp_path / 'state.db'}") as store:
        desk = PairingDesk(book, config_file, audit=store.audit, channel_of=lambda _n: None)
        ops = ControlOps(
            heartbeat=UNUSED,
            inbox=UNUSED,
            config_file=config_file,
            workspace_root=tmp_path,
            agent_problem=lambda: None,
            wake_heartbeat=lambda: None,
            steering=cast(Any, SimpleNamespace(pairing_desk=desk)),
        )
        parts = DashboardParts(
            store=store, clock=SystemClock(), config=Config, config_file=config_file,
            workspace_root=tmp_path, secret_file=tmp_path / "secret", heartbeat=UNUSED,
            sessions=UNUSED, health=dict, agent_problem=lambda: None, run_turn=UNUSED,
            apply_config=UNUSED, ops=ops,
        )  # fmt: skip
        dash = Dashboard(parts)
        login = dash.auth.login(SECRET)
        assert login is not None
        sid, session = login
        with TestClient(build(dash), base_url="http://127.0.0.1") as client:
            client.cookies.set(COOKIE, sid)
            yield client, session.csrf, book, store, config_file


def test_the_pending_codes_are_listed_and_a_press_needs_login_and_csrf(
    rig: tuple[TestClient, str, PairingBook, StateStore, Path],
) -> None:
    client, csrf, book, _, config_file = rig
    now = datetime.now(UTC)
    _, alice = book.request("telegram", "999", "999", now)
    _, mallory = book.request("telegram", "666", "666", now)
    assert alice is not None and mallory is not None

    listed = client.get("/pairing")
    assert listed.status_code == 200
    for code in (alice.code, mallory.code):
        assert f'name="code" value="{code}"' in listed.text
    assert listed.text.count(f'name="csrf" value="{csrf}"') >= 4  # approve + deny, each row

    forged = client.post("/pairing/approve", data={"code": alice.code})  # no CSRF token
    assert forged.status_code == 403
    client.cookies.clear()
    anonymous = client.post("/pairing/approve", data={"csrf": csrf, "code": alice.code})
    assert anonymous.status_code == 401
    assert client.get("/pairing", follow_redirects=False).status_code == 303  # to the login
    assert len(book.pending(now)) == 2  # neither let anyone in
    assert "999" not in config_file.read_text()


def test_approve_and_deny_change_the_allow_list_and_are_audited(
    rig: tuple[TestClient, str, PairingBook, StateStore, Path],
) -> None:
    client, csrf, book, store, config_file = rig
    now = datetime.now(UTC)
    _, alice = book.request("telegram", "999", "999", now)
    _, mallory = book.request("telegram", "666", "666", now)
    assert alice is not None and mallory is not None

    approved = client.post("/pairing/approve", data={"csrf": csrf, "code": alice.code.lower()})
    assert approved.status_code == 200
    assert "Let telegram:999 in: added to allow_from" in approved.text
    assert f'value="{alice.code}"' not in approved.text  # no longer pending
    denied = client.post("/pairing/deny", data={"csrf": csrf, "code": mallory.code})
    assert "Denied telegram:666" in denied.text and "No pairing requests." in denied.text

    saved = json.loads(config_file.read_text())["bot"]["channels"]["telegram"]["allowFrom"]
    assert saved == ["42", "999"]  # the approved one only
    actions = [(e["action"], e["outcome"]) for e in store.audit_events(action=None)]
    assert ("pairing.approve", "approved") in actions and ("pairing.deny", "denied") in actions

    again = client.post("/pairing/approve", data={"csrf": csrf, "code": alice.code})
    assert again.status_code == 409 and "no pending code" in again.text
    unknown = client.post("/pairing/ban", data={"csrf": csrf, "code": alice.code})
    assert unknown.status_code == 404
