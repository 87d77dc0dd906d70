"""OpenTelemetry traces (issue 47): the SDK's OTLP/HTTP exporter posts to a receiver on
loopback; a chat turn with a tool call and a heartbeat run each make one trace."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.conftest import LoopFactory
from tests.support.harness import build_harness, make_config
from tests.support.otlp import OtlpReceiver
from vikingbot import telemetry
from vikingbot.config.schema import Config
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call


@pytest.fixture
def otlp() -> Iterator[OtlpReceiver]:
    with OtlpReceiver.start() as rx:
        yield rx
    telemetry.shutdown()


async def test_a_chat_turn_with_a_tool_call_is_one_trace(
    otlp: OtlpReceiver,
    fake_openai: FakeOpenAI,
    make_loop: LoopFactory,
    agent_config: type[Config],
    workspace: Path,
) -> None:
    assert telemetry.configure(otlp.url, set_global=False)
    loop = make_loop(agent_config(fake_openai.base_url))
    fake_openai.script([tool_call("list_dir", {"path": "."}), reply("two files")])
    out = await loop.run_turn("what is here?", "telegram:bot:7", {"workspace": str(workspace)})
    assert out.text == "two files"
    telemetry.flush()
    otlp.wait_for(lambda spans: any(s.name == "invoke_agent vikingbot" for s in spans))

    (root,) = otlp.named("invoke_agent vikingbot")
    chats = otlp.named("chat openai-test-model")
    (tool,) = otlp.named("execute_tool list_dir")
    assert root.parent_id == ""
    assert root.attrs["gen_ai.conversation.id"] == "telegram:bot:7"
    assert root.attrs["vikingbot.model"] == "openai/openai-test-model"
    assert len(chats) == 2
    for span in [*chats, tool]:
        assert (span.trace_id, span.parent_id) == (root.trace_id, root.span_id)
    first, last = sorted(
        chats, key=lambda s: s.attrs["gen_ai.response.finish_reasons"] != ["tool_calls"]
    )
    assert first.attrs["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert last.attrs["gen_ai.response.finish_reasons"] == ["stop"]
    assert first.attrs["gen_ai.operation.name"] == "chat"
    assert first.attrs["gen_ai.provider.name"] == "openai"
    assert first.attrs["gen_ai.usage.input_tokens"] > 0
    assert first.kind == 3  # SPAN_KIND_CLIENT
    assert "gen_ai.input.messages" not in first.attrs  # content only when turned on
    assert tool.attrs["gen_ai.tool.name"] == "list_dir" and tool.attrs["vikingbot.tool.approved"]


async def test_content_goes_in_only_when_turned_on(
    otlp: OtlpReceiver,
    fake_openai: FakeOpenAI,
    make_loop: LoopFactory,
    agent_config: type[Config],
    workspace: Path,
) -> None:
    telemetry.configure(otlp.url, set_global=False, with_content=True)
    loop = make_loop(agent_config(fake_openai.base_url))
    fake_openai.script([reply("the secret is 42")])
    await loop.run_turn("tell me", "cli:default:x", {"workspace": str(workspace)})
    telemetry.flush()
    otlp.wait_for(lambda spans: any(s.name.startswith("chat ") for s in spans))
    (chat,) = [s for s in otlp.spans if s.name.startswith("chat ")]
    assert "tell me" in chat.attrs["gen_ai.input.messages"]
    assert "the secret is 42" in chat.attrs["gen_ai.output.messages"]


async def test_a_heartbeat_run_is_one_trace_with_its_decision(
    otlp: OtlpReceiver, tmp_path: Path
) -> None:
    from tests.support.home import with_tasks

    telemetry.configure(otlp.url, set_global=False)
    with FakeOpenAI.start() as fake:
        fake.script([reply("The build is red.")])
        async for h in build_harness(tmp_path, fake, make_config(fake.base_url, mode="per-task")):
            h.user_session()
            h.write(with_tasks("- Check the build"))
            report = await h.cycle()
            assert [r.decision for r in report.rows] == ["run"], report.rows
    telemetry.flush()
    otlp.wait_for(lambda spans: any(s.name == "heartbeat.run" for s in spans), 5)
    (run,) = otlp.named("heartbeat.run")
    (decide,) = otlp.named("heartbeat.decide")
    (turn,) = otlp.named("invoke_agent vikingbot")
    (chat,) = otlp.named("chat fake-model")
    assert run.parent_id == "" and run.attrs["vikingbot.heartbeat.entry"]
    assert decide.parent_id == run.span_id and decide.attrs["vikingbot.heartbeat.decision"] == "run"
    assert (turn.trace_id, turn.parent_id) == (run.trace_id, run.span_id)
    assert turn.attrs["vikingbot.turn.kind"] == "heartbeat"
    assert (chat.trace_id, chat.parent_id) == (run.trace_id, turn.span_id)
    delivered = otlp.named("deliver")
    assert delivered and all(d.trace_id == run.trace_id for d in delivered)


def test_with_telemetry_off_the_gateway_imports_no_opentelemetry() -> None:
    code = (
        "import sys, vikingbot.gateway.supervisor, vikingbot.gateway.compose, "
        "vikingbot.agent.loop, vikingbot.heartbeat.turn, vikingbot.cron.service, "
        "vikingbot.delivery.adapter, vikingbot.telemetry as t\n"
        "with t.span('x') as s: s.set('a', 1)\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"
