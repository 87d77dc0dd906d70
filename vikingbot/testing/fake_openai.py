"""A scripted OpenAI chat-completions server on 127.0.0.1, for tests and benches.

Speaks ``POST /v1/chat/completions`` as the official SDK expects (text replies,
``tool_calls``, usage, error bodies with status codes and ``retry-after-ms``),
records every request, and replays a script (see ``fake_llm``):

    with FakeOpenAI.start() as fake:          # default answer: "HEARTBEAT_OK"
        fake.script([tool_call("read_file", {"path": "SOUL.md"}), reply("done")])
        config.bot.providers["openai"].api_base = fake.base_url   # ".../v1"
        ...
        assert fake.requests[1].messages[-1]["role"] == "tool"
"""

from __future__ import annotations

import json
import time
from typing import Any

from vikingbot.testing.fake_llm import (
    FakeModelServer,
    RecordedRequest,
    Step,
    default_error_message,
    error,
    garbage,
    reply,
    tokens,
    tool_call,
    tool_calls,
    trickle,
)

__all__ = [
    "FakeOpenAI",
    "RecordedRequest",
    "Step",
    "error",
    "garbage",
    "reply",
    "tool_call",
    "tool_calls",
    "trickle",
]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_denied",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_ERROR_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}


class FakeOpenAI(FakeModelServer):
    route = "/v1/chat/completions"
    base_path = "/v1"

    def presented_key(self, headers: dict[str, str]) -> str | None:
        auth = headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None

    def render_reply(self, step: Step, request: RecordedRequest, n: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
        if step.calls:
            message["tool_calls"] = [
                {
                    "id": call_id or f"call_{n}_{i}",
                    "type": "function",
                    "function": {
                        "name": name,
                        # a str is sent as written: a model's broken JSON
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for i, (call_id, name, args) in enumerate(step.calls)
            ]
        tin, tout = tokens(step, request)
        return {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if step.calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout},
        }

    def render_stream(self, rendered: dict[str, Any]) -> list[tuple[str, Any]] | None:
        """The reply as ``chat.completion.chunk`` events (no event names), then ``[DONE]``."""
        choice = rendered["choices"][0]
        message = choice["message"]
        head = {k: rendered[k] for k in ("id", "created", "model")}
        head["object"] = "chat.completion.chunk"

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> Any:
            return (
                "",
                {
                    **head,
                    "choices": [
                        {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
                    ],
                    **extra,
                },
            )

        events = [chunk({"role": "assistant", "content": message["content"] or ""})]
        calls = message.get("tool_calls") or []
        if calls:
            events.append(chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]}))
        events.append(chunk({}, choice["finish_reason"], usage=rendered["usage"]))
        events.append(("", "[DONE]"))
        return events

    def render_error(self, step: Step, request: RecordedRequest) -> dict[str, Any]:
        status = step.status
        return {
            "error": {
                "message": step.message or default_error_message(status, request.model),
                "type": step.error_type
                or _ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error"),
                "param": None,
                "code": step.error_code or _ERROR_CODES.get(status),
            }
        }
