"""A scripted Anthropic Messages API server on 127.0.0.1, for tests and benches.

Speaks ``POST /v1/messages`` as the official SDK expects (text and
``tool_use`` content blocks, ``stop_reason``, usage, error bodies with status
codes and ``retry-after-ms``), records every request, and replays a script
(see ``fake_llm``):

    with FakeAnthropic.start() as fake:       # default answer: "HEARTBEAT_OK"
        fake.script([tool_call("list_dir", {}), reply("done")])
        config.bot.providers["anthropic"].api_base = fake.base_url
"""

from __future__ import annotations

import json
from typing import Any

from vikingbot.testing.fake_llm import (
    FakeModelServer,
    RecordedRequest,
    Step,
    default_error_message,
    error,
    reply,
    tokens,
    tool_call,
    tool_calls,
)

__all__ = ["FakeAnthropic", "RecordedRequest", "Step", "error", "reply", "tool_call", "tool_calls"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class FakeAnthropic(FakeModelServer):
    route = "/v1/messages"
    base_path = ""

    def presented_key(self, headers: dict[str, str]) -> str | None:
        # SDK 2.x sends "Authorization: Bearer <key>"; older clients send x-api-key.
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:]
        return headers.get("x-api-key")

    def render_reply(self, step: Step, request: RecordedRequest, n: int) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if step.text:
            content.append({"type": "text", "text": step.text})
        for i, (call_id, name, args) in enumerate(step.calls):
            content.append(
                {"type": "tool_use", "id": call_id or f"toolu_{n}_{i}", "name": name, "input": args}
            )
        tin, tout = tokens(step, request)
        return {
            "id": f"msg_fake_{n}",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": content,
            "stop_reason": "tool_use" if step.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": tin, "output_tokens": tout},
        }

    def render_stream(self, rendered: dict[str, Any]) -> list[tuple[str, Any]] | None:
        """The Messages streaming events for one reply (as the SDKs' stream parsers expect)."""
        start = {**rendered, "content": [], "stop_reason": None}
        start["usage"] = {"input_tokens": rendered["usage"]["input_tokens"], "output_tokens": 0}
        events: list[tuple[str, Any]] = [
            ("message_start", {"type": "message_start", "message": start})
        ]
        for i, block in enumerate(rendered["content"]):
            head: dict[str, Any]
            delta: dict[str, Any]
            if block["type"] == "text":
                head, delta = (
                    {"type": "text", "text": ""},
                    {"type": "text_delta", "text": block["text"]},
                )
            else:
                head = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": head},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": i}),
            ]
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": rendered["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": rendered["usage"]["output_tokens"]},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return events

    def render_error(self, step: Step, request: RecordedRequest) -> dict[str, Any]:
        status = step.status
        return {
            "type": "error",
            "error": {
                "type": step.error_type
                or _ERROR_TYPES.get(
                    status, "api_error" if status >= 500 else "invalid_request_error"
                ),
                "message": step.message or default_error_message(status, request.model),
            },
        }
