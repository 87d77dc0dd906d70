"""The openai provider against the fake chat-completions server (real SDK path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from vikingbot.config.schema import ProviderConfig
from vikingbot.errors import (
    ContextTooLongError,
    ProviderAuthError,
    ProviderError,
    ProviderNotFoundError,
    ProviderUnreachable,
)
from vikingbot.providers.base import ChatMessage, ChatRequest, ToolCall
from vikingbot.providers.openai_compat import OpenAIProvider
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply, tool_calls, trickle
from vikingbot.tools.base import ToolSchema

READ = ToolSchema(
    "read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}
)


@pytest.fixture
def provider(closing: list[Any]) -> Callable[..., OpenAIProvider]:
    def make(base_url: str, **kw: object) -> OpenAIProvider:
        cfg = ProviderConfig.model_validate({"api_base": base_url, "api_key": "sk-test", **kw})
        p = OpenAIProvider("openai", cfg, environ={})
        closing.append(p)
        return p

    return make


def request(*messages: ChatMessage, tools: list[ToolSchema] | None = None) -> ChatRequest:
    msgs = list(messages) or [ChatMessage("system", "be brief"), ChatMessage("user", "hi")]
    return ChatRequest(model="gpt-test", messages=msgs, tools=tools or [], max_tokens=99)


async def test_text_reply_and_usage(
    fake_openai: FakeOpenAI, provider: Callable[..., OpenAIProvider]
) -> None:
    fake_openai.script([reply("hello there", tokens_in=12, tokens_out=3)])
    p = provider(fake_openai.base_url, price_input_per_mtok=1.0, price_output_per_mtok=2.0)
    resp = await p.complete(request())
    assert resp.text == "hello there"
    assert resp.tool_calls == []
    assert (resp.tokens_in, resp.tokens_out) == (12, 3)
    assert p.cost(1_000_000, 500_000) == pytest.approx(2.0)
    body = fake_openai.requests[0].body
    assert body["model"] == "gpt-test"
    assert body["max_tokens"] == 99  # compatible endpoints get max_tokens
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert fake_openai.requests[0].headers["authorization"] == "Bearer sk-test"


async def test_tool_calls_round_trip_in_wire_format(
    fake_openai: FakeOpenAI, provider: Callable[..., OpenAIProvider]
) -> None:
    fake_openai.script([tool_calls(("read_file", {"path": "a.md"}), ("read_file", {"path": "b"}))])
    p = provider(fake_openai.base_url)
    resp = await p.complete(request(ChatMessage("user", "read both"), tools=[READ]))
    assert [(c.name, c.arguments) for c in resp.tool_calls] == [
        ("read_file", {"path": "a.md"}),
        ("read_file", {"path": "b"}),
    ]
    sent = fake_openai.requests[0].body
    assert sent["tools"][0]["function"]["name"] == "read_file"
    assert sent["tool_choice"] == "auto"

    # The calls and their results go back in the shape the API expects.
    history = [
        ChatMessage("user", "read both"),
        ChatMessage("assistant", "", tool_calls=resp.tool_calls),
        ChatMessage("tool", "A", tool_call_id=resp.tool_calls[0].id, name="read_file"),
        ChatMessage("tool", "B", tool_call_id=resp.tool_calls[1].id, name="read_file"),
    ]
    fake_openai.script([reply("done")])
    await p.complete(request(*history, tools=[READ]))
    msgs = fake_openai.requests[1].messages
    assert msgs[1]["tool_calls"][0]["function"] == {
        "name": "read_file",
        "arguments": '{"path": "a.md"}',
    }
    assert msgs[2] == {"role": "tool", "tool_call_id": resp.tool_calls[0].id, "content": "A"}


async def test_invalid_json_arguments_are_kept_not_crashed(fake_openai: FakeOpenAI) -> None:
    # The fake always sends valid JSON; the parser is what matters here.
    from vikingbot.providers.openai_compat import parse_arguments

    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("{not json") == {"__invalid_json__": "{not json"}
    assert parse_arguments("[1]") == {"__invalid_json__": "[1]"}
    assert parse_arguments("") == {}


async def test_retries_429_and_503_then_succeeds(
    fake_openai: FakeOpenAI, provider: Callable[..., OpenAIProvider]
) -> None:
    fake_openai.script([error(429), error(503), reply("finally")])
    p = provider(fake_openai.base_url, max_retries=3)
    resp = await p.complete(request())
    assert resp.text == "finally"
    assert len(fake_openai.requests) == 3


async def test_gives_up_after_max_retries_with_a_clear_message(
    fake_openai: FakeOpenAI, provider: Callable[..., OpenAIProvider]
) -> None:
    fake_openai.script([error(429), error(429), error(429)])
    p = provider(fake_openai.base_url, max_retries=1)
    with pytest.raises(ProviderError, match=r"rate limiting \(429\) after 1 retry"):
        await p.complete(request())
    assert len(fake_openai.requests) == 2
    assert fake_openai.remaining == 1


async def test_rejected_key_says_what_to_set(
    fake_openai: FakeOpenAI, provider: Callable[..., OpenAIProvider]
) -> None:
    fake_openai.script([error(401)])
    p = provider(fake_openai.base_url)
    with pytest.raises(ProviderAuthError) as exc:
        await p.complete(request())
    assert str(exc.value) == (
        "the openai API key was rejected (401); set bot.providers.openai.api_key or OPENAI_API_KEY"
    )
    assert len(fake_openai.requests) == 1  # 401 is not retried


async def test_key_from_environment_is_used(closing: list[Any]) -> None:
    with FakeOpenAI.start(require_key="sk-from-env") as fake:
        cfg = ProviderConfig(api_base=fake.base_url)
        p = OpenAIProvider("openai", cfg, environ={"OPENAI_API_KEY": "sk-from-env"})
        closing.append(p)
        assert (await p.complete(request())).text == "HEARTBEAT_OK"
        wrong = OpenAIProvider("openai", cfg, environ={"OPENAI_API_KEY": "sk-other"})
        closing.append(wrong)
        with pytest.raises(ProviderAuthError):
            await wrong.complete(request())


async def test_missing_key_for_openai_itself_is_refused_before_any_call() -> None:
    p = OpenAIProvider("openai", ProviderConfig(), environ={})
    with pytest.raises(ProviderAuthError, match="OPENAI_API_KEY"):
        await p.complete(request())


async def test_unknown_model(
    fake_openai: FakeOpenAI, provider: Callable[..., OpenAIProvider]
) -> None:
    fake_openai.script([error(404)])
    p = provider(fake_openai.base_url)
    with pytest.raises(ProviderNotFoundError) as exc:
        await p.complete(request())
    assert "model 'gpt-test' was not found" in str(exc.value)
    assert fake_openai.base_url in str(exc.value)
    assert "bot.agents.model" in str(exc.value)


async def test_context_too_long(
    fake_openai: FakeOpenAI, provider: Callable[..., OpenAIProvider]
) -> None:
    fake_openai.script(
        [
            error(
                400,
                "This model's maximum context length is 8192 tokens.",
                code="context_length_exceeded",
            )
        ]
    )
    p = provider(fake_openai.base_url)
    with pytest.raises(ContextTooLongError, match="too long for model 'gpt-test'"):
        await p.complete(request())


async def test_unreachable_endpoint_names_the_url(
    closed_port_url: str, provider: Callable[..., OpenAIProvider]
) -> None:
    p = provider(closed_port_url + "/v1", max_retries=1)
    with pytest.raises(ProviderUnreachable) as exc:
        await p.complete(request())
    assert f"{closed_port_url}/v1 is unreachable after 1 retry" in str(exc.value)
    assert "bot.providers.openai.api_base" in str(exc.value)


async def test_request_timeout_is_reported_as_timed_out(
    fake_openai: FakeOpenAI, provider: Callable[..., OpenAIProvider]
) -> None:
    fake_openai.script([reply("late", delay_s=1.5)])
    p = provider(fake_openai.base_url, timeout_s=0.1, max_retries=0)
    started = time.monotonic()
    with pytest.raises(ProviderUnreachable, match="timed out"):
        await p.complete(request())
    assert time.monotonic() - started < 1.2


async def test_an_answer_that_trickles_ends_at_timeout_s_not_the_turn_timeout(
    fake_openai: FakeOpenAI, provider: Callable[..., OpenAIProvider]
) -> None:
    """The SDK's timeout is per read: a byte every 20 ms never trips it. timeout_s is
    documented per request, and bounds the whole of it (an outage, not a failure)."""
    fake_openai.script([trickle()])
    p = provider(fake_openai.base_url, timeout_s=0.5, max_retries=0)
    started = time.monotonic()
    with pytest.raises(ProviderUnreachable, match=r"no whole answer within 0.5s") as exc:
        await p.complete(request())
    assert time.monotonic() - started < 3
    assert "bot.providers.openai.timeout_s" in str(exc.value)


async def test_tool_choice_none_is_sent(
    fake_openai: FakeOpenAI, provider: Callable[..., OpenAIProvider]
) -> None:
    p = provider(fake_openai.base_url)
    req = request(ChatMessage("user", "x"), tools=[READ])
    req.tool_choice = "none"
    await p.complete(req)
    assert fake_openai.requests[0].tool_choice == "none"


def test_tool_call_unpacks_as_a_triple() -> None:
    call_id, name, args = ToolCall("c1", "exec", {"command": "ls"})
    assert (call_id, name, args) == ("c1", "exec", {"command": "ls"})


async def test_the_fake_streams_in_the_sdks_own_chunk_format(fake_openai: FakeOpenAI) -> None:
    """Other bots (nanobot) stream; the SDK's stream parser reads the fake's chunks."""
    from openai import AsyncOpenAI

    fake_openai.script([tool_calls(("read_file", {"path": "a"})), reply("done")])
    client = AsyncOpenAI(api_key="k", base_url=fake_openai.base_url, max_retries=0)
    try:
        got = []
        for _ in range(2):
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async for chunk in stream:
                d = chunk.choices[0].delta if chunk.choices else None
                got.append((d.content if d else None, chunk.choices[0].finish_reason))
                if d and d.tool_calls:
                    assert d.tool_calls[0].function.name == "read_file"  # type: ignore[union-attr]
    finally:
        await client.close()
    assert ("done", None) in got and got[-1] == (None, "stop")
    assert (None, "tool_calls") in got
