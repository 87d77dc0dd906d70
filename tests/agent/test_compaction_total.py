"""What a model or a session file holds is untrusted: the readers never raise and stay linear."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from vikingbot.agent import compact
from vikingbot.memory.consolidate import parse_reply
from vikingbot.session.sizes import last_request
from vikingbot.session.types import Message

T0 = datetime(2026, 12, 1, tzinfo=UTC)
lines = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.sampled_from(["=== MEMORY.md", "=== USER.md", "NO_CHANGE", "=== SOUL.md", ""]),
    ),
    max_size=30,
)


@given(lines, st.integers(min_value=1, max_value=500))
def test_parse_reply_is_total_and_capped(parts: list[str], cap: int) -> None:
    got = parse_reply("\n".join(parts), cap)
    assert set(got) <= {"MEMORY.md", "USER.md"}
    assert all(len(text) <= cap + 1 for text in got.values())


metas = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=5),
    st.fixed_dictionaries({"kept": st.one_of(st.integers(-3, 9), st.text(max_size=3), st.none())}),
)


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), metas)))
def test_split_is_total_and_reading_backwards_agrees(rows: list[tuple[str, object]]) -> None:
    history = [
        Message(role, f"m{i}", T0, metadata={} if meta is None else {compact.KEY: meta})
        for i, (role, meta) in enumerate(rows)
    ]
    forward = compact.split(history)
    assert compact.split_back(reversed(history)) == forward
    assert all(not compact.is_summary(m) for m in forward.recent)


@settings(max_examples=50)
@given(st.binary(max_size=2000))
def test_last_request_never_raises(tmp_path_factory: object, data: bytes) -> None:
    path = Path(str(tmp_path_factory.mktemp("s"))) / "x.jsonl"  # type: ignore[attr-defined]
    path.write_bytes(b'{"key": "cli:default:x"}\n' + data + b'\n{"metadata": {"request": {')
    found = last_request(path)
    assert found is None or set(found) == {"system", "memory", "summary", "recent", "tools"}
