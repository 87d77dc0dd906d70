"""Resolving targets to destinations: untrusted tags are refused and fall back to the owner."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from vikingbot.config.schema import Config
from vikingbot.delivery.service import DeliveryService
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey, SessionMeta
from vikingbot.store.db import StateStore

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)

BASE: dict[str, Any] = {
    "owner": "slack:D0OWNER",
    "channels": {
        "cli": {"enabled": False},
        "slack": {"enabled": True, "allowFrom": ["C0TEAM", "U0ALICE"]},
        "telegram": {"enabled": True, "allowFrom": ["100"], "ownerChat": "4242"},
    },
}


def service(tmp_path: Path, **bot: Any) -> DeliveryService:
    merged = {**BASE, **bot}
    config = Config.model_validate({"bot": merged})
    # resolve() touches neither the database nor the sessions
    return DeliveryService(
        config,
        store=cast(StateStore, None),
        sessions=SessionStore(tmp_path / "sessions"),
    )


def meta(key: str, minutes_ago: int | None) -> SessionMeta:
    seen = None if minutes_ago is None else T0.replace(minute=59 - minutes_ago, hour=11)
    return SessionMeta(SessionKey.parse(key), T0, T0, seen)


SESSIONS = [
    meta("slack:default:C0TEAM", 30),
    meta("telegram:default:100", 5),
    meta("heartbeat:default:shared", 1),  # not a chat: never a destination
    meta("slack:default:D0NEVER", None),  # never spoke: not "last"
]


@pytest.mark.parametrize(
    ("target", "expected", "refused"),
    [
        (None, ["slack:D0OWNER"], None),
        ("owner", ["slack:D0OWNER"], None),
        ("slack:C0TEAM", ["slack:C0TEAM"], None),
        ("slack:C0TEAM:1700.000100", ["slack:C0TEAM:1700.000100"], None),
        ("slack:U0ALICE", ["slack:U0ALICE"], None),
        ("slack:D0OWNER", ["slack:D0OWNER"], None),
        ("slack:D0OWNER:17.1", ["slack:D0OWNER:17.1"], None),
        ("slack:", ["slack:D0OWNER"], None),
        ("slack", ["slack:D0OWNER"], None),
        ("telegram", ["telegram:4242"], None),
        ("telegram:100", ["telegram:100"], None),
        ("telegram:4242", ["telegram:4242"], None),
        ("slack:C0EVIL", ["slack:D0OWNER"], "not on slack.allow_from"),
        ("telegram:-100999", ["slack:D0OWNER"], "not on telegram.allow_from"),
        ("webhook:ops", ["slack:D0OWNER"], "'webhook' is not enabled"),
        ("discord:123", ["slack:D0OWNER"], "unknown channel"),
        ("slack:C0TEAM\nslack:C0EVIL", ["slack:D0OWNER"], "malformed"),
        ("slack:../C0TEAM", ["slack:D0OWNER"], "malformed"),
        ("", ["slack:D0OWNER"], "malformed"),
        ("last", ["telegram:100"], None),
        ("all", ["slack:C0TEAM", "telegram:100", "slack:D0NEVER"], None),
        ("none", [], None),
        ("silent", [], None),
        ("dashboard", ["dashboard:default"], None),
        ("dashboard:news", ["dashboard:news"], None),
        ("prompt:dashboard:ops", ["prompt:dashboard:ops"], None),
    ],
)
def test_resolve(
    tmp_path: Path, target: str | None, expected: list[str], refused: str | None
) -> None:
    res = service(tmp_path).resolve(target, sessions=SESSIONS)
    assert [str(d) for d in res.destinations] == expected
    if refused is None:
        assert res.refused is None
    else:
        assert res.refused is not None and refused in res.refused


def test_the_heartbeat_target_setting_is_the_default(tmp_path: Path) -> None:
    svc = service(tmp_path, heartbeat={"target": "dashboard:hb"})
    assert [str(d) for d in svc.resolve(None).destinations] == ["dashboard:hb"]


def test_without_an_owner_owner_means_last(tmp_path: Path) -> None:
    channels = {**BASE["channels"], "telegram": {"enabled": True, "allowFrom": ["100"]}}
    svc = service(tmp_path, owner=None, channels=channels)
    res = svc.resolve("owner", sessions=SESSIONS)
    assert [str(d) for d in res.destinations] == ["telegram:100"]
    assert res.note and "no owner" in res.note


def test_without_an_owner_or_a_chat_a_refused_result_lands_in_the_inbox(tmp_path: Path) -> None:
    channels = {**BASE["channels"], "telegram": {"enabled": True}}
    svc = service(tmp_path, owner=None, channels=channels)
    res = svc.resolve("slack:C0EVIL", sessions=[])
    assert [str(d) for d in res.destinations] == ["dashboard:default"]
    assert res.refused is not None


def test_owner_falls_back_to_a_channels_owner_chat(tmp_path: Path) -> None:
    # bot.owner names a channel that is off: the enabled channels' owner_chat is used
    svc = service(tmp_path, owner="webhook:me")
    assert [str(d) for d in svc.resolve("owner").destinations] == ["telegram:4242"]


def test_a_session_in_a_thread_is_answered_in_the_thread(tmp_path: Path) -> None:
    threaded = [meta("slack:default:C0TEAM:1700.5", 1)]
    [dest] = service(tmp_path).resolve("last", sessions=threaded).destinations
    assert (dest.chat_id, dest.thread, str(dest.session_key)) == (
        "C0TEAM",
        "1700.5",
        "slack:default:C0TEAM:1700.5",
    )


def test_last_and_all_without_chats_go_to_the_owner(tmp_path: Path) -> None:
    svc = service(tmp_path)
    only_heartbeat = [meta("heartbeat:default:shared", 1)]
    assert [str(d) for d in svc.resolve("last", sessions=only_heartbeat).destinations] == [
        "slack:D0OWNER"
    ]
    assert [str(d) for d in svc.resolve("all", sessions=[]).destinations] == ["slack:D0OWNER"]
