"""Files in a JSON body (``bus.sent_files``): the control API's chat and the webhook."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vikingbot.bus.sent_files import SentFilesError, encode_file, parse_sent_files
from vikingbot.gateway.bodycap import FILES_LIMIT, limit_for

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@given(json_values)
def test_any_json_value_is_files_or_a_clear_error(value: Any) -> None:
    try:
        files = parse_sent_files(value)
    except SentFilesError as exc:
        assert "files" in str(exc)
    else:
        assert all(f.name.strip() for f in files)


async def test_a_file_round_trips_and_fetch_honours_the_cap() -> None:
    (f,) = parse_sent_files([encode_file("a.txt", b"hello world", "text/plain")])
    att = f.attachment()
    assert (att.name, att.mime, att.size) == ("a.txt", "text/plain", 11)
    assert await att.fetch(100) == b"hello world"
    assert len(await att.fetch(4)) == 5  # one byte past the cap: the intake says too big


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("x", "'files' must be a list"),
        ([{"name": "a", "data": "!!"}], "files[0]: 'data' is not valid base64"),
        ([{"data": "aGk="}], "files[0]: 'name' must be a non-empty string"),
        ([{"name": "a", "data": "aGk=", "type": 3}], "files[0]: 'type'"),
        ([{"name": "a", "data": "aGk="}] * 11, "at most 10 per message"),
        ([{"name": "é", "data": "aé="}], "not valid base64"),
    ],
)
def test_bad_files_are_refused_naming_the_entry(value: Any, said: str) -> None:
    with pytest.raises(SentFilesError, match=said.replace("[", r"\[").replace("]", r"\]")):
        parse_sent_files(value)


def test_only_the_routes_that_carry_files_get_the_raised_body_cap() -> None:
    assert limit_for("/api/v1/chat") == FILES_LIMIT == limit_for("/webhook/inbound")
    assert limit_for("/api/v1/chat/answer") == limit_for("/api/v1/heartbeat") == 64 * 1024
    assert limit_for("/webhook/other") == 64 * 1024
    assert base64.b64decode(encode_file("x", b"\xff")["data"]) == b"\xff"
