"""The JSONL session store: round trips, metadata, atomic writes, corrupt files, locks."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from filelock import FileLock

from vikingbot.clock import FakeClock
from vikingbot.errors import SessionError
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message, SessionKey

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
KEY = SessionKey("telegram", "default", "12345")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> SessionStore:
    return SessionStore(tmp_path / "sessions", clock)


def msg(role: str, content: str, minutes: int = 0, **kw: object) -> Message:
    return Message(role, content, T0 + timedelta(minutes=minutes), **kw)  # type: ignore[arg-type]


def test_messages_round_trip_with_every_field(store: SessionStore) -> None:
    sent = [
        msg("user", "What's on my calendar?", metadata={"sender": "u1"}),
        msg(
            "assistant",
            "",
            1,
            tool_calls=[{"id": "c1", "name": "read_file", "arguments": {"path": "cal.md"}}],
            usage={"input": 120, "output": 8},
        ),
        msg("tool", "09:00 standup", 1, tool_call_id="c1", name="read_file"),
        msg("assistant", "Standup at 09:00.\u2028Line sep and emoji 🚀 stay intact.", 2),
    ]
    store.append(KEY, *sent)
    assert store.read_messages(KEY) == sent
    assert store.read_messages(KEY, limit=2) == sent[-2:]
    assert store.read_messages(KEY, limit=0) == []
    assert store.message_count(KEY) == 4


def test_file_layout_is_metadata_line_then_one_message_per_line(
    store: SessionStore, clock: FakeClock
) -> None:
    store.get_or_create(KEY)
    clock.advance(minutes=5)
    store.append(KEY, msg("user", "hi", 3))
    lines = store.path_for(KEY).read_text("utf-8").splitlines()
    assert json.loads(lines[0]) == {
        "_type": "metadata",
        "key": "telegram:default:12345",
        "created_at": "2026-01-05T12:00:00+00:00",
        "updated_at": "2026-01-05T12:05:00+00:00",
        "last_user_at": "2026-01-05T12:03:00+00:00",
        "metadata": {"skip_heartbeat": False},
    }
    assert json.loads(lines[1]) == {
        "role": "user",
        "content": "hi",
        "timestamp": "2026-01-05T12:03:00+00:00",
    }
    assert len(lines) == 2


def test_get_or_create_sets_skip_heartbeat_only_when_creating(store: SessionStore) -> None:
    cli = SessionKey("cli", "default", "direct")
    assert store.get_or_create(cli, skip_heartbeat=True).skip_heartbeat is True
    assert store.get_or_create(cli).skip_heartbeat is True  # existing keeps its setting
    assert store.get_or_create(KEY).skip_heartbeat is False
    assert store.get_meta("cli:default:direct") == store.get_meta(cli)
    assert store.get_meta(SessionKey("cli", "default", "nobody")) is None


def test_only_real_user_messages_make_a_session_fresh(
    store: SessionStore, clock: FakeClock
) -> None:
    store.append(KEY, msg("user", "remind me", 0))
    clock.advance(days=3)
    meta = store.append(
        KEY,
        msg("user", "heartbeat prompt", 60 * 24 * 3, metadata={"heartbeat": True}),
        msg("user", "consolidate", 60 * 24 * 3, metadata={"bookkeeping": True}),
        msg("assistant", "done", 60 * 24 * 3),
    )
    assert meta.last_user_at == T0
    assert meta.updated_at == T0 + timedelta(days=3)
    assert store.get_meta(KEY) == meta


def test_append_creates_a_missing_session(store: SessionStore) -> None:
    meta = store.append(KEY, msg("assistant", "delivered result"))
    assert meta.created_at == T0
    assert meta.last_user_at is None
    assert [m.content for m in store.read_messages(KEY)] == ["delivered result"]


def test_update_metadata_merges_removes_and_keeps_messages(store: SessionStore) -> None:
    store.append(KEY, msg("user", "hi"))
    store.update_metadata(KEY, skip_heartbeat=True, owner=True)
    meta = store.update_metadata(KEY, owner=None)
    assert meta.metadata == {"skip_heartbeat": True}
    assert store.get_meta(KEY) == meta
    assert [m.content for m in store.read_messages(KEY)] == ["hi"]


def test_update_metadata_of_unknown_session_is_an_error(store: SessionStore) -> None:
    with pytest.raises(SessionError, match="unknown session telegram:default:12345"):
        store.update_metadata(KEY, skip_heartbeat=True)
    assert not store.path_for(KEY).exists()


def test_unknown_top_level_fields_of_the_metadata_line_survive_writes(
    store: SessionStore,
) -> None:
    store.get_or_create(KEY)
    path = store.path_for(KEY)
    obj = json.loads(path.read_text("utf-8"))
    obj["written_by"] = "a newer vikingbot"
    path.write_text(json.dumps(obj) + "\n", "utf-8")
    store.append(KEY, msg("user", "hi"))
    assert json.loads(path.read_text("utf-8").splitlines()[0])["written_by"] == "a newer vikingbot"


def test_reset_drops_messages_and_keeps_metadata(store: SessionStore, clock: FakeClock) -> None:
    store.get_or_create(KEY, skip_heartbeat=True)
    store.append(KEY, msg("user", "one"), msg("assistant", "two"))
    clock.advance(minutes=1)
    meta = store.reset(KEY)
    assert meta is not None and meta.skip_heartbeat and meta.last_user_at == T0
    assert store.read_messages(KEY) == []
    assert store.reset(SessionKey("cli", "default", "nobody")) is None


def test_list_sessions_newest_first_and_reads_only_metadata(
    store: SessionStore, clock: FakeClock
) -> None:
    older, newer = SessionKey("slack", "T1", "C1"), SessionKey("cli", "default", "direct")
    store.append(older, msg("user", "a"))
    clock.advance(minutes=1)
    store.append(newer, msg("user", "b"))
    # a broken message line does not matter to a listing: only line 1 is read
    with store.path_for(older).open("a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    assert [m.key for m in store.list_sessions()] == [newer, older]


def test_list_sessions_reports_a_broken_metadata_line_and_lists_the_rest(
    store: SessionStore,
) -> None:
    store.get_or_create(KEY)
    bad = store.sessions_dir / "broken.jsonl"
    bad.write_text('{"_type": "metadata", "key": \n', "utf-8")
    errors: list[SessionError] = []
    assert [m.key for m in store.list_sessions(errors)] == [KEY]
    assert len(errors) == 1
    assert f"{bad}:1" in str(errors[0])


def test_empty_or_missing_folder_lists_nothing(tmp_path: Path) -> None:
    assert SessionStore(tmp_path / "nowhere").list_sessions() == []


def test_a_corrupt_message_line_names_file_and_line(store: SessionStore) -> None:
    store.append(KEY, msg("user", "one"), msg("assistant", "two"))
    path = store.path_for(KEY)
    lines = path.read_text("utf-8").splitlines()
    lines[2] = '{"role": "assistant", "content": "tw'
    path.write_text("\n".join(lines) + "\n", "utf-8")
    with pytest.raises(SessionError) as info:
        store.read_messages(KEY)
    assert f"{path}:3" in str(info.value)
    # appending never drops the broken line, and reading past it still works
    store.append(KEY, msg("user", "three"))
    assert path.read_text("utf-8").splitlines()[2] == '{"role": "assistant", "content": "tw'
    assert store.read_messages(KEY, limit=1)[0].content == "three"


def test_a_corrupt_metadata_line_is_never_overwritten(store: SessionStore) -> None:
    store.append(KEY, msg("user", "precious"))
    path = store.path_for(KEY)
    broken = b'{"_type": "metadata", "key": "telegram:default:12345", "created_at": 5}\n'
    original = broken + path.read_bytes().split(b"\n", 1)[1]
    path.write_bytes(original)
    for write in (
        lambda: store.append(KEY, msg("user", "more")),
        lambda: store.update_metadata(KEY, skip_heartbeat=True),
        lambda: store.reset(KEY),
        lambda: store.get_or_create(KEY),
    ):
        with pytest.raises(SessionError, match=re.escape(f"{path}:1: created_at")):
            write()
    assert path.read_bytes() == original


def test_a_failed_write_leaves_the_old_file_intact(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.append(KEY, msg("user", "one"))
    path = store.path_for(KEY)
    before = path.read_bytes()

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        store.append(KEY, msg("user", "two"))
    monkeypatch.undo()
    assert path.read_bytes() == before
    # no temp file left behind
    assert sorted(p.name for p in store.sessions_dir.iterdir()) == [".locks", path.name]


def test_hostile_keys_stay_inside_the_sessions_folder(store: SessionStore) -> None:
    keys = [
        SessionKey("webhook", "default", "../../etc/passwd"),
        SessionKey("webhook", "..", "a/b\\c"),
        SessionKey("webhook", "default", "nul\0byte"),
        SessionKey("webhook", "default", "CON"),
        SessionKey("webhook", "default", "🚀" * 100),
        SessionKey(".", "..", "."),
    ]
    for key in keys:
        store.append(key, msg("user", str(key)))
    files = [p for p in store.sessions_dir.iterdir() if p.suffix == ".jsonl"]
    assert len(files) == len(keys)
    assert all(p.resolve().parent == store.sessions_dir.resolve() for p in files)
    for key in keys:
        assert store.read_messages(key)[0].content == str(key)
    assert sorted(m.key for m in store.list_sessions()) == sorted(keys)


def test_naive_message_time_is_refused_and_nothing_is_written(store: SessionStore) -> None:
    with pytest.raises(SessionError, match="timezone-aware"):
        store.append(KEY, Message("user", "hi", datetime(2026, 1, 1)))
    assert not store.path_for(KEY).exists()


def test_a_session_locked_by_another_process_times_out_with_a_clear_error(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path / "sessions", FakeClock(T0), lock_timeout=0.05)
    store.get_or_create(KEY)
    held = FileLock(store.sessions_dir / ".locks" / (store.path_for(KEY).name + ".lock"))
    with held, pytest.raises(SessionError, match="locked by another process"):
        store.append(KEY, msg("user", "hi"))
    store.append(KEY, msg("user", "hi"))  # free again
    assert store.message_count(KEY) == 1


_WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from pathlib import Path
    from vikingbot.session.store import SessionStore
    from vikingbot.session.types import Message
    store = SessionStore(Path(sys.argv[1]))
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(int(sys.argv[2])):
        store.append("telegram:default:12345", Message("user", f"child {i}", datetime.now(UTC)))
    """
)


def test_two_processes_appending_to_one_session_lose_nothing(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    store.get_or_create(KEY)
    n = 40
    with subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(store.sessions_dir), str(n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        child.stdin.write("go\n")
        child.stdin.close()
        for i in range(n):
            store.append(KEY, Message("user", f"parent {i}", datetime.now(UTC)))
        assert child.wait(timeout=60) == 0
    contents = [m.content for m in store.read_messages(KEY)]
    expected = [f"parent {i}" for i in range(n)] + [f"child {i}" for i in range(n)]
    assert sorted(contents) == sorted(expected)
    assert [c for c in contents if c.startswith("child")] == [f"child {i}" for i in range(n)]


async def test_turn_lock_keeps_two_turns_on_one_session_apart(store: SessionStore) -> None:
    assert store.turn_lock(KEY) is store.turn_lock("telegram:default:12345")
    assert store.turn_lock(KEY) is not store.turn_lock(SessionKey("cli", "default", "x"))
    events: list[str] = []

    async def turn(name: str) -> None:
        async with store.turn_lock(KEY):
            events.append(f"{name} start")
            await asyncio.sleep(0)
            events.append(f"{name} end")

    await asyncio.gather(turn("user"), turn("heartbeat"))
    assert events == ["user start", "user end", "heartbeat start", "heartbeat end"]


def test_lone_surrogates_in_content_survive(store: SessionStore) -> None:
    store.append(KEY, msg("user", "broken \udc80 text"))
    assert store.read_messages(KEY)[0].content == "broken \udc80 text"


def test_listing_sees_changes_made_by_another_process(tmp_path: Path) -> None:
    gateway = SessionStore(tmp_path / "s", FakeClock(T0))
    cli = SessionStore(tmp_path / "s", FakeClock(T0 + timedelta(hours=1)))
    gateway.get_or_create(KEY)
    first = gateway.list_sessions()
    first[0].metadata["skip_heartbeat"] = "mutated by a caller"
    assert gateway.list_sessions()[0].skip_heartbeat is False
    cli.update_metadata(KEY, skip_heartbeat=True)
    cli.append(SessionKey("cli", "default", "direct"), msg("user", "hi", 60))
    listed = gateway.list_sessions()
    assert [m.key for m in listed] == [SessionKey("cli", "default", "direct"), KEY]
    assert listed[1].skip_heartbeat is True
    cli.path_for(KEY).unlink()
    assert [m.key for m in gateway.list_sessions()] == [SessionKey("cli", "default", "direct")]


def test_locked_holds_the_same_lock_writers_use(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s", FakeClock(T0), lock_timeout=0.05)
    other = SessionStore(tmp_path / "s", FakeClock(T0), lock_timeout=0.05)
    store.get_or_create(KEY)
    with other.locked(KEY) as path:
        assert path == store.path_for(KEY)
        with pytest.raises(SessionError, match="locked"):
            store.append(KEY, msg("user", "hi"))
