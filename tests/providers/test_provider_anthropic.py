"""The anthropic provider against the fake Messages API server (real SDK path)."""

from __future__ import annotations

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
from vikingbot.providers.anthropic_provider import AnthropicProvider, to_wire_messages
from vikingbot.providers.base import ChatMessage, ChatRequest, ToolCall
from vikingbot.testing.fake_anthropic import FakeAnthropic, error, reply, tool_call
from vikingbot.tools.base import ToolSchema

LIST = ToolSchema("list_dir", "List a folder", {"type": "object", "properties": {}})


@pytest.fixture
def provider(closing: list[Any]) -> Callable[..., AnthropicProvider]:
    def make(base_url: str, **kw: object) -> AnthropicProvider:
        cfg = ProviderConfig.model_validate({"api_base": base_url, "api_key": "sk-ant", **kw})
        p = AnthropicProvider("anthropic", cfg, environ={})
        closing.append(p)
        return p

    return make


def request(*messages: ChatMessage, tools: list[ToolSchema] | None = None) -> ChatRequest:
    msgs = list(messages) or [ChatMessage("system", "be brief"), ChatMessage("user", "hi")]
    return ChatRequest(model="claude-test", messages=msgs, tools=tools or [], max_tokens=77)


async def test_text_reply_system_prompt_and_key(
    fake_anthropic: FakeAnthropic, provider: Callable[..., AnthropicProvider]
) -> None:
    fake_anthropic.script([reply("hi!", tokens_in=20, tokens_out=2)])
    resp = await provider(fake_anthropic.base_url).complete(request())
    assert (resp.text, resp.tokens_in, resp.tokens_out) == ("hi!", 20, 2)
    sent = fake_anthropic.requests[0]
    assert sent.body["system"] == "be brief"
    assert sent.body["max_tokens"] == 77
    assert sent.messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert fake_anthropic.presented_key(sent.headers) == "sk-ant"


async def test_tool_use_and_results_in_wire_format(
    fake_anthropic: FakeAnthropic, provider: Callable[..., AnthropicProvider]
) -> None:
    fake_anthropic.script([tool_call("list_dir", {"path": "."}, text="Looking."), reply("ok")])
    p = provider(fake_anthropic.base_url)
    first = await p.complete(request(ChatMessage("user", "what is here?"), tools=[LIST]))
    assert first.text == "Looking."
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("list_dir", {"path": "."})]
    assert fake_anthropic.requests[0].body["tools"][0]["input_schema"] == LIST.parameters
    assert fake_anthropic.requests[0].tool_choice == {"type": "auto"}

    call = first.tool_calls[0]
    await p.complete(
        request(
            ChatMessage("user", "what is here?"),
            ChatMessage("assistant", first.text, tool_calls=first.tool_calls),
            ChatMessage("tool", "a.md", tool_call_id=call.id, name="list_dir"),
            tools=[LIST],
        )
    )
    msgs = fake_anthropic.requests[1].messages
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"][1] == {
        "type": "tool_use",
        "id": call.id,
        "name": "list_dir",
        "input": {"path": "."},
    }
    assert msgs[2]["content"] == [
        {"type": "tool_result", "tool_use_id": call.id, "content": "a.md"}
    ]


def test_consecutive_roles_are_merged_and_the_first_turn_is_the_user() -> None:
    wire = to_wire_messages(
        [
            ChatMessage("system", "s"),
            ChatMessage("assistant", "left over"),
            ChatMessage("user", "one"),
            ChatMessage("assistant", "", tool_calls=[ToolCall("t1", "x", {})]),
            ChatMessage("tool", "r1", tool_call_id="t1"),
            ChatMessage("user", "two"),
        ]
    )
    assert [m["role"] for m in wire] == ["user", "assistant", "user", "assistant", "user"]
    assert [b["type"] for b in wire[-1]["content"]] == ["tool_result", "text"]


async def test_retries_429_and_overloaded_529(
    fake_anthropic: FakeAnthropic, provider: Callable[..., AnthropicProvider]
) -> None:
    fake_anthropic.script([error(429), error(529), reply("there")])
    resp = await provider(fake_anthropic.base_url, max_retries=2).complete(request())
    assert resp.text == "there"
    assert len(fake_anthropic.requests) == 3


async def test_persistent_503_becomes_a_provider_error(
    fake_anthropic: FakeAnthropic, provider: Callable[..., AnthropicProvider]
) -> None:
    fake_anthropic.script([error(503), error(503)])
    with pytest.raises(ProviderError, match=r"failed \(503\) after 1 retry"):
        await provider(fake_anthropic.base_url, max_retries=1).complete(request())


async def test_rejected_key(
    fake_anthropic: FakeAnthropic, provider: Callable[..., AnthropicProvider]
) -> None:
    fake_anthropic.script([error(401)])
    with pytest.raises(ProviderAuthError) as exc:
        await provider(fake_anthropic.base_url).complete(request())
    assert str(exc.value) == (
        "the anthropic API key was rejected (401); "
        "set bot.providers.anthropic.api_key or ANTHROPIC_API_KEY"
    )


async def test_unknown_model_and_context_overflow(
    fake_anthropic: FakeAnthropic, provider: Callable[..., AnthropicProvider]
) -> None:
    p = provider(fake_anthropic.base_url)
    fake_anthropic.script([error(404, "model: claude-test")])
    with pytest.raises(ProviderNotFoundError, match="model 'claude-test' was not found"):
        await p.complete(request())
    fake_anthropic.script([error(400, "prompt is too long: 210000 tokens > 200000 maximum")])
    with pytest.raises(ContextTooLongError, match="history_window"):
        await p.complete(request())


async def test_unreachable(
    closed_port_url: str, provider: Callable[..., AnthropicProvider]
) -> None:
    with pytest.raises(ProviderUnreachable, match=f"{closed_port_url} is unreachable"):
        await provider(closed_port_url, max_retries=0).complete(request())


async def test_missing_key_for_anthropic_itself() -> None:
    p = AnthropicProvider("anthropic", ProviderConfig(), environ={})
    with pytest.raises(ProviderAuthError, match="ANTHROPIC_API_KEY"):
        await p.complete(request())
