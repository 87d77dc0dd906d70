"""The OpenAI-compatible API (issue 47): the official ``openai`` SDK against a real gateway
process, whose model is a scripted fake on loopback."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.support.gateway_proc import GatewayProcess
from tests.support.trickle_model import TrickleModel
from vikingbot.cli.app import app
from vikingbot.openai_api import wire
from vikingbot.openai_api.live import Transcript
from vikingbot.openai_api.tokens import parse
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call


def _token(home: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    monkeypatch.setenv("VIKINGBOT_HOME", str(home))
    monkeypatch.delenv("VIKINGBOT_CONFIG", raising=False)
    result = CliRunner().invoke(app, ["api", "token", *args])
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip()


WORDS = [f"word{i} " for i in range(30)]  # 30 x 0.08 s: 2.4 s of writing
EVERY_S = 0.08


@pytest.fixture(scope="module")
def trickle() -> Iterator[TrickleModel]:
    with TrickleModel.start(WORDS, every_s=EVERY_S) as model:
        yield model


@pytest.fixture(scope="module")
def rig(
    tmp_path_factory: pytest.TempPathFactory, trickle: TrickleModel
) -> Iterator[tuple[GatewayProcess, FakeOpenAI]]:
    home = tmp_path_factory.mktemp("oai") / "home"
    home.mkdir()
    with FakeOpenAI.start() as fake:
        fake.default = reply("default answer")
        cfg = {
            "bot": {
                "agents": {
                    "provider": "openai",
                    "model": "m1",
                    "fallbackModels": [
                        {"provider": "openai", "model": "m2"},
                        {"provider": "slow", "model": "trickle"},
                    ],
                },
                "providers": {
                    "openai": {"apiBase": fake.base_url, "apiKey": "sk-x", "maxRetries": 0},
                    "slow": {
                        "kind": "openai",
                        "apiBase": trickle.base_url,
                        "apiKey": "sk-x",
                        "maxRetries": 0,
                    },
                },
            }
        }
        (home / "config.json").write_text(json.dumps(cfg))
        with GatewayProcess(home) as gw:
            yield gw, fake


def _client(gw: GatewayProcess, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key=token, max_retries=0, timeout=60)


def test_the_openai_sdk_chats_streams_and_is_kept_apart(
    rig: tuple[GatewayProcess, FakeOpenAI], monkeypatch: pytest.MonkeyPatch
) -> None:
    gw, fake = rig
    alice = _client(gw, _token(gw.home, monkeypatch, "add", "alice"))
    bob = _client(gw, _token(gw.home, monkeypatch, "add", "bob"))
    stored = (gw.home / "data" / "api" / "tokens.json").read_text()
    assert "vbk_" not in stored and set(parse(stored)) == {"alice", "bob"}  # hashed only

    ids = [m.id for m in alice.models.list()]
    assert ids == ["vikingbot", "openai/m1", "openai/m2", "slow/trickle"]

    fake.script([reply("Hello Alice")])
    out = alice.chat.completions.create(
        model="vikingbot", messages=[{"role": "user", "content": "my name is Alice"}], user="c1"
    )
    assert out.choices[0].message.content == "Hello Alice"
    assert out.model == "openai/m1" and out.usage is not None and out.usage.total_tokens > 0

    fake.script([reply("a streamed answer " * 60)])
    stream = alice.chat.completions.create(
        model="openai/m2",
        messages=[{"role": "user", "content": "tell me more"}],
        user="c1",
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "a streamed answer " * 60
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert fake.requests[-1].model == "m2"  # the model the client chose
    assert "my name is Alice" in fake.requests[-1].text  # alice's c1 history

    fake.script([reply("Hi Bob")])
    bob.chat.completions.create(
        model="vikingbot", messages=[{"role": "user", "content": "who am I?"}], user="c1"
    )
    assert "my name is Alice" not in fake.requests[-1].text  # bob's c1 is his own
    sessions = {p.name for p in (gw.home / "data" / "sessions").rglob("*.jsonl")}
    assert any("alice" in s for s in sessions) and any("bob" in s for s in sessions)

    with pytest.raises(openai.AuthenticationError):
        _client(gw, "vbk_not-a-token").chat.completions.create(
            model="vikingbot", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.NotFoundError, match="not one of this bot's models"):
        alice.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    _token(gw.home, monkeypatch, "revoke", "bob")
    with pytest.raises(openai.AuthenticationError):
        bob.models.list()
    # a page on another site cannot reach it through DNS rebinding (Host) either
    forged = httpx.get(f"{gw.base_url}/v1/models", headers={"host": "rebind.evil.example"})
    assert forged.status_code == 421
    big = httpx.post(
        f"{gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {alice.api_key}"},
        content=b"x" * 70_000,
    )
    assert big.status_code == 413


def test_a_stream_carries_the_text_as_the_model_writes_it(
    rig: tuple[GatewayProcess, FakeOpenAI], trickle: TrickleModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    gw, _ = rig
    carol = _client(gw, _token(gw.home, monkeypatch, "add", "carol"))
    ask = {"model": "slow/trickle", "messages": [{"role": "user", "content": "write"}]}
    stream = carol.chat.completions.create(**ask, user="s1", stream=True)  # type: ignore[call-overload]
    arrived: list[tuple[float, str]] = []
    finish = []
    for c in stream:
        if c.choices and c.choices[0].delta.content:
            arrived.append((time.monotonic(), c.choices[0].delta.content))
        if c.choices and c.choices[0].finish_reason:
            finish.append(c.choices[0].finish_reason)
    streamed = "".join(piece for _, piece in arrived)
    assert streamed == trickle.text and finish == ["stop"]
    assert len(arrived) >= len(WORDS) // 2  # word by word, not one block at the end
    writing = EVERY_S * len(WORDS)
    # the first words were shown while the model was still writing the rest
    assert arrived[-1][0] - arrived[0][0] > writing / 2, arrived
    whole = carol.chat.completions.create(**ask, user="s2")  # type: ignore[call-overload]
    assert whole.choices[0].message.content == streamed  # the same answer, not streamed
    assert not trickle.cut.is_set()
    with carol.chat.completions.create(**ask, user="s3", stream=True) as cut:  # type: ignore[call-overload]
        next(c for c in cut if c.choices and c.choices[0].delta.content)
    # the client hung up after the first words: the turn, and its model call, stop
    assert trickle.cut.wait(30)


def test_a_tool_call_is_a_comment_and_the_text_around_it_is_the_answer(
    rig: tuple[GatewayProcess, FakeOpenAI], monkeypatch: pytest.MonkeyPatch
) -> None:
    gw, fake = rig
    token = _token(gw.home, monkeypatch, "add", "dave")
    steps = [tool_call("read_file", {"path": "SOUL.md"}, text="Let me look."), reply("Found it.")]
    body = {"model": "vikingbot", "messages": [{"role": "user", "content": "look"}]}
    auth = {"authorization": f"Bearer {token}"}
    fake.script(steps)
    with httpx.stream(
        "POST",
        f"{gw.base_url}/v1/chat/completions",
        headers=auth,
        json={**body, "stream": True},
        timeout=60,
    ) as r:
        lines = [line for line in r.iter_lines() if line]
    assert ": tool read_file" in lines  # shown to curl, ignored by the SDKs
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert text == "Let me look.\n\nFound it." and lines[-1] == "data: [DONE]"
    fake.script(steps)
    whole = httpx.post(f"{gw.base_url}/v1/chat/completions", headers=auth, json=body, timeout=60)
    assert whole.json()["choices"][0]["message"]["content"] == text


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (None, None),
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "vikingbot", "messages": []}, "messages"),
        ({"model": "vikingbot", "messages": [{"role": "assistant", "content": "x"}]}, "messages"),
        ({"model": "vikingbot", "messages": [{"role": "user", "content": "x"}], "user": 5}, "user"),
    ],
)
def test_bad_requests_name_the_field(body: object, param: str | None) -> None:
    found = wire.parse_request(body)
    assert isinstance(found, wire.WireError) and found.param == param


def test_content_parts_are_read_as_text() -> None:
    body = {
        "model": "vikingbot",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "x"}]}],
        "stream": True,
    }
    assert wire.parse_request(body) == wire.CompletionRequest("vikingbot", "a", True)


events = st.lists(
    st.one_of(
        st.tuples(st.just("begin"), st.just("")),
        st.tuples(st.just("delta"), st.text(alphabet=" \nab", max_size=6)),
        st.tuples(st.just("tool"), st.just("exec")),
        st.tuples(st.just("said"), st.text(alphabet=" \nxy", max_size=6)),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(events, st.none() | st.text(alphabet=" \nzq", max_size=6))
def test_what_is_streamed_is_the_answer(steps: list[tuple[str, str]], final: str | None) -> None:
    shown: list[str] = []
    tools: list[str] = []
    live = Transcript(emit=shown.append, on_tool=tools.append)
    for kind, value in steps:
        if kind == "begin":
            live.begin()
        elif kind == "delta":
            live.delta(value)
        elif kind == "tool":
            live.tool(value)
        else:
            live.said(value)
        assert "".join(shown) == live.text()  # at every moment, a start of the answer
    answer = live.finish(final)
    assert "".join(shown) == answer
    assert tools == [v for k, v in steps if k == "tool"]
    said = "".join("".join(v.split()) for k, v in steps if k in ("delta", "said"))
    assert "".join(answer.split()).startswith(said)  # nothing the turn said is dropped


def test_the_answer_is_each_part_in_turn() -> None:
    shown: list[str] = []
    live = Transcript(emit=shown.append)
    live.begin()
    for piece in ["Let me ", "look."]:
        live.delta(piece)
    live.tool("read_file")
    live.said("working on it")
    live.begin()
    live.delta("  ")  # held until the part has words
    assert "".join(shown) == "Let me look.\n\nworking on it"
    live.delta("Done.")
    assert live.finish("  Done.") == "Let me look.\n\nworking on it\n\n  Done."
    assert "".join(shown) == live.text()
    plain = Transcript()  # a provider that does not stream: the reply is the last part
    plain.said("note")
    assert plain.finish("the reply") == "note\n\nthe reply"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(json_values)
def test_the_request_parser_is_total(value: object) -> None:
    wire.parse_request(value)
    wire.parse_request({"model": "m", "messages": [value]})
    parse(json.dumps(value))


@given(st.text(max_size=2000))
def test_pieces_join_to_the_text(text: str) -> None:
    assert "".join(wire.pieces(text, 50)) == text


async def test_the_mcp_client_over_streamable_http_with_scoped_tokens(
    rig: tuple[GatewayProcess, FakeOpenAI], monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    gw, _ = rig
    ws = gw.home / "data" / "workspace" / "shared"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "HEARTBEAT.md").write_text("# Heartbeat Tasks\n\n## Active Tasks\n\n")
    reader = _token(gw.home, monkeypatch, "add", "reader", "--scope", "mcp")
    writer = _token(gw.home, monkeypatch, "add", "writer", "--scope", "mcp-write")

    @contextlib.asynccontextmanager
    async def client(token: str) -> AsyncIterator[Client]:
        headers = {"authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            url = f"{gw.base_url}/mcp"
            async with Client(streamable_http_client(url, http_client=http)) as c:
                yield c

    add = {"workspace": "shared", "text": "every: 1h title: CI task: Check CI"}
    async with client(reader) as c:
        assert json.loads((await c.call_tool("read_inbox", {})).content[0].text) == []
        refused = await c.call_tool("add_heartbeat_entry", add)
        assert refused.is_error and "mcp-write" in refused.content[0].text
    async with client(writer) as c:
        added = await c.call_tool("add_heartbeat_entry", add)
        assert not added.is_error
        plan = json.loads(
            (await c.call_tool("heartbeat_plan", {"workspace": "shared"})).content[0].text
        )
        assert any("CI" in json.dumps(d) for d in plan["decisions"])
        ran = await c.call_tool("run_heartbeat_now", {"workspace": "shared"})
        assert not ran.is_error and "results" in json.loads(ran.content[0].text)
        told = await c.call_tool("message_owner", {"text": "hello from the IDE"})
        assert not told.is_error  # no owner here: delivery says so in the answer
        found = await c.call_tool("search_history", {"query": "Alice"})
        assert isinstance(json.loads(found.content[0].text), list)
    assert "- every: 1h title: CI task: Check CI" in (ws / "HEARTBEAT.md").read_text()
    with pytest.raises(Exception):  # noqa: B017 (the SDK raises its transport's error)
        async with client("vbk_wrong") as c:
            await c.list_tools()
    chat_only = _token(gw.home, monkeypatch, "add", "chatter")
    bad = httpx.post(f"{gw.base_url}/mcp", headers={"authorization": f"Bearer {chat_only}"})
    assert bad.status_code == 403
