"""Images on the wire (the real SDKs against the fakes), unattended turns text-only, and
read_file reading a PDF a person sent."""

from __future__ import annotations

import base64
from pathlib import Path

from tests.media.conftest import text_pdf
from vikingbot.agent.history import take_images
from vikingbot.bus import MessageBus
from vikingbot.config.schema import Config, ProviderConfig
from vikingbot.providers.anthropic_provider import AnthropicProvider
from vikingbot.providers.base import ChatMessage, ChatRequest, ImagePart
from vikingbot.providers.openai_compat import OpenAIProvider
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_anthropic import FakeAnthropic
from vikingbot.testing.fake_anthropic import reply as claude_reply
from vikingbot.testing.fake_openai import FakeOpenAI, reply
from vikingbot.tools.base import ToolContext
from vikingbot.tools.fs import ReadFileTool

PIC = ImagePart("image/jpeg", b"\xff\xd8\xff\xe0fake-jpeg-bytes")


def _request(model: str) -> ChatRequest:
    msgs = [ChatMessage("system", "be brief"), ChatMessage("user", "what is it?", images=[PIC])]
    return ChatRequest(model=model, messages=msgs, max_tokens=50)


async def test_openai_gets_the_image_as_an_image_url_part(fake_openai: FakeOpenAI) -> None:
    fake_openai.script([reply("a cat")])
    cfg = ProviderConfig.model_validate({"api_base": fake_openai.base_url, "api_key": "sk"})
    p = OpenAIProvider("openai", cfg, environ={})
    try:
        assert (await p.complete(_request("gpt-4o"))).text == "a cat"
    finally:
        await p.aclose()
    (text, image) = fake_openai.requests[0].messages[-1]["content"]
    assert text == {"type": "text", "text": "what is it?"}
    assert (
        image["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(PIC.data).decode()
    )


async def test_anthropic_gets_the_image_as_a_base64_image_block(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.script([claude_reply("a cat")])
    cfg = ProviderConfig.model_validate({"api_base": fake_anthropic.base_url, "api_key": "sk"})
    p = AnthropicProvider("anthropic", cfg, environ={})
    try:
        assert (await p.complete(_request("claude-test"))).text == "a cat"
    finally:
        await p.aclose()
    image, text = fake_anthropic.requests[0].body["messages"][-1]["content"]
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": PIC.b64()},
    }
    assert text == {"type": "text", "text": "what is it?"}


def test_an_unattended_turn_sends_no_images() -> None:
    meta: dict[str, object] = {"images": [PIC], "sender": "42"}
    assert take_images(meta) == [PIC] and meta == {"sender": "42"}  # the bytes go no further
    assert take_images({"images": [PIC], "unattended": True}) == []
    assert take_images({"images": ["not an image"]}) == []


async def test_read_file_reads_the_text_of_a_pdf_in_the_inbox(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "inbox").mkdir(parents=True)
    (ws / "inbox/20261206-203012-invoice.pdf").write_bytes(
        text_pdf("Invoice 4711", "Total due: 120 EUR")
    )
    (ws / "inbox/broken.pdf").write_bytes(b"%PDF-1.4\nnot really")
    ctx = ToolContext(
        workspace=ws, session_key=SessionKey("cli", "default", "local"), config=Config(),
        bus=MessageBus(),
    )  # fmt: skip
    tool = ReadFileTool()
    text = await tool.run({"path": "inbox/20261206-203012-invoice.pdf"}, ctx)
    assert text.startswith("--- page 1 ---\n")
    assert "Invoice 4711" in text and "Total due: 120 EUR" in text
    try:
        await tool.run({"path": "inbox/broken.pdf"}, ctx)
    except Exception as exc:  # a ToolError: goes back to the model as text
        assert "is not a PDF I can read" in str(exc)
    else:
        raise AssertionError("a broken PDF was read")
