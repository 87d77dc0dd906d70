"""Importing an OpenViking vikingbot sessions folder."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from vikingbot.clock import FakeClock
from vikingbot.errors import SessionError
from vikingbot.session.openviking import import_openviking, parse_key
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey

NOW = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)


def write_jsonl(path: Path, *objs: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs), "utf-8")
    return path


@pytest.fixture
def berlin_time() -> Iterator[None]:
    """OpenViking wrote local times without an offset; pretend the machine was in Berlin."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "openviking" / "sessions"
    write_jsonl(
        folder / "telegram__default__12345.jsonl",
        {
            "_type": "metadata",
            "session_key": "telegram__default__12345",
            "created_at": "2026-01-10T10:00:00",
            "updated_at": "2026-01-10T10:05:00",
            "metadata": {"skip_heartbeat": False, "openviking": {"id": "abc"}},
        },
        {
            "role": "user",
            "content": "Remind me to water the plants",
            "timestamp": "2026-01-10T10:00:00",
            "sender_id": "777",
        },
        {
            "role": "assistant",
            "content": "",
            "timestamp": "2026-01-10T10:00:05",
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "cron"}}],
            "token_usage": {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940},
        },
        {
            "role": "tool",
            "content": "scheduled",
            "timestamp": "2026-01-10T10:00:06",
            "tool_call_id": "t1",
            "name": "cron",
        },
        {
            "role": "user",
            "content": [{"type": "text", "text": "and this photo"}, {"type": "image_url"}],
            "timestamp": "2026-01-10T10:05:00",
        },
    )
    write_jsonl(
        folder / "whatever.jsonl",
        {"_type": "metadata", "session_key": "slack:T01:C02", "metadata": {}},
        {"role": "user", "content": "hello", "timestamp": "2026-01-11T08:00:00+00:00"},
    )
    write_jsonl(
        folder / "cli_direct.jsonl",
        {"_type": "metadata", "created_at": "2026-01-09T12:00:00+00:00", "metadata": {}},
    )
    return folder


def test_imports_history_keys_and_times(source: Path, tmp_path: Path, berlin_time: None) -> None:
    store = SessionStore(tmp_path / "ours", FakeClock(NOW))
    report = import_openviking(source, store)
    assert (report.count("imported"), report.count("exists"), report.count("failed")) == (3, 0, 0)

    key = SessionKey("telegram", "default", "12345")
    meta = store.get_meta(key)
    assert meta is not None
    # 10:00 in Berlin (UTC+1 in January) is 09:00 UTC
    assert meta.created_at == datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
    assert meta.updated_at == datetime(2026, 1, 10, 9, 5, tzinfo=UTC)
    assert meta.last_user_at == datetime(2026, 1, 10, 9, 5, tzinfo=UTC)
    assert meta.metadata["openviking"] == {"id": "abc"}
    assert meta.metadata["imported_from"]["kind"] == "openviking"
    assert not meta.skip_heartbeat

    messages = store.read_messages(key)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[0].metadata == {"openviking": {"sender_id": "777"}}
    assert messages[1].usage == {"input": 900, "output": 40}
    assert messages[1].tool_calls == [
        {"id": "t1", "type": "function", "function": {"name": "cron"}}
    ]
    assert (messages[2].tool_call_id, messages[2].name) == ("t1", "cron")
    assert messages[3].content == "and this photo\n[image_url]"

    assert [m.content for m in store.read_messages("slack:T01:C02")] == ["hello"]
    cli = store.get_meta(SessionKey("cli", "default", "direct"))  # key from the file name
    assert cli is not None and cli.created_at == datetime(2026, 1, 9, 12, 0, tzinfo=UTC)


def test_source_is_untouched_and_a_second_run_changes_nothing(source: Path, tmp_path: Path) -> None:
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in source.iterdir()}
    store = SessionStore(tmp_path / "ours", FakeClock(NOW))
    import_openviking(source, store)
    ours = {p: p.read_bytes() for p in store.sessions_dir.glob("*.jsonl")}

    again = import_openviking(source, store)
    assert [o.status for o in again.outcomes] == ["exists"] * 3
    assert {p: p.read_bytes() for p in store.sessions_dir.glob("*.jsonl")} == ours
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in source.iterdir()} == before


def test_an_existing_session_of_ours_is_never_overwritten(source: Path, tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "ours", FakeClock(NOW))
    store.get_or_create("slack:T01:C02", skip_heartbeat=True)
    report = import_openviking(source, store)
    exists = [o for o in report.outcomes if o.status == "exists"]
    assert [o.key for o in exists] == ["slack:T01:C02"]
    assert store.read_messages("slack:T01:C02") == []


def test_bad_files_are_skipped_with_their_reason_and_the_rest_imports(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    good = write_jsonl(
        folder / "telegram__default__1.jsonl",
        {"_type": "metadata", "session_key": "telegram__default__1"},
        {"role": "user", "content": "ok", "timestamp": "2026-01-01T00:00:00+00:00"},
    )
    broken = folder / "telegram__default__2.jsonl"
    broken.write_text(
        '{"_type": "metadata", "session_key": "telegram__default__2"}\n'
        '{"role": "user", "content": "fine", "timestamp": "2026-01-01T00:00:00+00:00"}\n'
        '{"role": "user", "content": "cut off\n',
        "utf-8",
    )
    no_meta = write_jsonl(folder / "x__y__z.jsonl", {"role": "user", "content": "hi"})
    latin1 = folder / "a__b__c.jsonl"
    latin1.write_bytes(b'{"_type": "metadata", "session_key": "a__b__c"}\n{"content": "\xe9"}\n')
    nokey = write_jsonl(folder / "plain.jsonl", {"_type": "metadata"})

    store = SessionStore(tmp_path / "ours", FakeClock(NOW))
    report = import_openviking(folder, store)
    reasons = {o.source: o.reason for o in report.outcomes if o.status == "failed"}
    assert set(reasons) == {str(broken), str(no_meta), str(latin1), str(nokey)}
    assert f"{broken}:3: not valid JSON" in str(reasons[str(broken)])
    assert f"{no_meta}:1: the first line is not a metadata line" in str(reasons[str(no_meta)])
    assert "not valid UTF-8" in str(reasons[str(latin1)])
    assert "cannot tell channel and chat apart" in str(reasons[str(nokey)])
    assert [m.key for m in store.list_sessions()] == [SessionKey("telegram", "default", "1")]
    assert good.exists()
    assert report.to_dict()["failed"] == 4


def test_a_data_folder_with_a_sessions_subfolder_and_a_single_file_both_work(
    source: Path, tmp_path: Path
) -> None:
    store = SessionStore(tmp_path / "ours", FakeClock(NOW))
    assert import_openviking(source.parent, store).count("imported") == 3
    one = SessionStore(tmp_path / "one", FakeClock(NOW))
    report = import_openviking(source / "whatever.jsonl", one)
    assert [o.key for o in report.outcomes] == ["slack:T01:C02"]


def test_a_missing_source_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="no such file or folder"):
        import_openviking(tmp_path / "nope", SessionStore(tmp_path / "ours"))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("telegram__default__12345", SessionKey("telegram", "default", "12345")),
        ("slack__T01__C02__thread", SessionKey("slack", "T01", "C02__thread")),
        ("telegram__12345", SessionKey("telegram", "default", "12345")),
        ("telegram:12345", SessionKey("telegram", "default", "12345")),
        ("slack:T01:C02:1700000000.1", SessionKey("slack", "T01", "C02:1700000000.1")),
    ],
)
def test_session_key_forms(text: str, key: SessionKey) -> None:
    assert parse_key(text) == key


def test_nanobot_style_names_only_from_file_names() -> None:
    assert parse_key("telegram_12345", from_filename=True) == SessionKey(
        "telegram", "default", "12345"
    )
    with pytest.raises(SessionError):
        parse_key("telegram_12345")
