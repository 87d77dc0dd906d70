"""A hostile ACP agent behind a real gateway (issue 38): mislabelled permissions never widen what
runs unattended, and while it reads pipes and devices, floods, writes garbage or hangs, another
chat is answered at once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.hostile_acp import MISLABELLED, PIPES, HostileGateway

pytest.importorskip("acp")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileGateway]:
    rig = HostileGateway(tmp_path_factory.mktemp("hostile")).start()
    yield rig
    rig.stop()


def test_mislabelled_permissions_are_refused_in_a_heartbeat(hostile: HostileGateway) -> None:
    run = hostile.heartbeat_now()
    assert run.status == 200 and run.body["results"], run.body
    rows = [e for e in hostile.audit() if e["action"].startswith("tool.")]
    # the scheduled cycle may run beside run-now: each run asks every scripted permission once
    runs, rest = divmod(len(rows), len(MISLABELLED))
    assert runs >= 1 and rest == 0, rows
    assert hostile.wrongly_approved() == 0
    approved = sorted(e["details"]["title"] for e in rows if e["action"] == "tool.approve")
    assert approved == sorted(["Find TODOs", "Look at notes.md"] * runs)
    assert all(e["actor"] == "heartbeat" and e["details"]["kind"] for e in rows)


def _text(answer: dict[str, object]) -> str:
    return str(answer.get("reply") or "") + str(answer.get("error") or "")


@pytest.mark.parametrize(
    ("mode", "expect"),
    [
        ("fifo", lambda a: _text(a).count("not a regular file") == PIPES and "done" in _text(a)),
        ("device", lambda a: _text(a).count("outside the workspace") == 2
            and "not a regular file" in _text(a)),
        ("flood", lambda a: a.get("ended") in ("final", "timeout")),  # the point: the calm chat
        ("garbage", lambda a: "not JSON-RPC" in _text(a)),
        ("hang", lambda a: a.get("ended") == "timeout"),
    ],
)  # fmt: skip
def test_a_calm_chat_is_answered_while_the_agent_misbehaves(
    hostile: HostileGateway, mode: str, expect: object
) -> None:
    bad, calm = hostile.calm_beside(mode)
    assert bad.status == 200 and callable(expect) and expect(bad.body), bad.body
    assert calm.status == 200 and calm.body.get("reply") == "hi", calm.body
    assert calm.seconds < 2.0, f"the calm chat waited {calm.seconds:.1f} s"
    health = hostile.gw.get("/health") if hostile.gw else {}
    assert not [p for p in health["problems"] if "thread" in p or "stuck" in p], health
