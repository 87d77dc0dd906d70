"""The OpenAI chat-completions wire format: what a request means, what an answer looks like.

Pure and total: :func:`parse_request` turns any decoded JSON value into a
:class:`CompletionRequest` or a :class:`WireError` naming the field and what is
wrong (never an exception); the ``*_body`` / ``chunk`` functions build the
answers the official SDKs parse.

The bot keeps each conversation's history itself (its session), so only the
last message of ``messages`` is the new prompt: it must be a ``user`` message.
Earlier messages (a client resends the whole conversation each time) and
``system`` messages are not used; the session and the workspace's files are the
context, as on a chat platform.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

MAX_PROMPT_CHARS = 100_000
MAX_CONVERSATION_CHARS = 200
DEFAULT_CONVERSATION = "default"


@dataclass(frozen=True)
class CompletionRequest:
    model: str
    prompt: str
    stream: bool = False
    include_usage: bool = False
    conversation: str | None = None  # from ``user``; a header may give it instead


@dataclass(frozen=True)
class WireError:
    message: str
    param: str | None = None
    status: int = 400
    code: str | None = None
    type: str = "invalid_request_error"

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def conversation_problem(value: str) -> str | None:
    """Why ``value`` cannot name a conversation (it ends a session key), or None."""
    if not value or len(value) > MAX_CONVERSATION_CHARS:
        return f"must be 1-{MAX_CONVERSATION_CHARS} characters"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return "may not contain control characters"
    return None


def _text(content: Any) -> str | None:
    """A message's text: a string, or the ``text`` parts of a list; None otherwise."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        ]
        return "\n".join(parts) if parts else None
    return None


def parse_request(data: Any) -> CompletionRequest | WireError:
    """A decoded request body -> what to run, or what is wrong with it. Pure, total."""
    if not isinstance(data, dict):
        return WireError("the request body must be a JSON object")
    model = data.get("model")
    if not isinstance(model, str) or not model.strip() or len(model) > 300:
        return WireError("'model' is required: a model id from GET /v1/models", "model")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        return WireError("'messages' must be a non-empty list of messages", "messages")
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return WireError(
            "the last message must be the user's (role 'user'): the bot keeps the "
            "conversation's history itself",
            "messages",
        )
    prompt = _text(last.get("content"))
    if prompt is None or not prompt.strip():
        return WireError("the last message has no text content", "messages")
    if len(prompt) > MAX_PROMPT_CHARS:
        return WireError(
            f"the message is {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}",
            "messages",
        )
    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        return WireError("'stream' must be true or false", "stream")
    options = data.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    user = data.get("user")
    if user is not None:
        if not isinstance(user, str):
            return WireError("'user' must be a string (it names the conversation)", "user")
        problem = conversation_problem(user)
        if problem:
            return WireError(f"'user' {problem}", "user")
    return CompletionRequest(model.strip(), prompt, stream, include_usage, user or None)


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def usage(tokens_in: int, tokens_out: int) -> dict[str, int]:
    return {
        "prompt_tokens": tokens_in,
        "completion_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
    }


def completion_body(
    cid: str, model: str, text: str, tokens_in: int, tokens_out: int, finish: str = "stop"
) -> dict[str, Any]:
    """A whole ``chat.completion``."""
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": usage(tokens_in, tokens_out),
    }


def chunk(
    cid: str,
    model: str,
    created: int,
    delta: dict[str, Any],
    finish: str | None = None,
    *,
    use: dict[str, int] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` (``choices=False``: the usage-only last chunk)."""
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": (
            [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
            if choices
            else []
        ),
    }
    if use is not None:
        body["usage"] = use
    return body


def pieces(text: str, size: int = 400) -> list[str]:
    """The reply in content deltas of about ``size`` characters, split after whitespace
    where one is near (a client shows them as they come). Pure; joined, they are ``text``."""
    out: list[str] = []
    rest = text
    while len(rest) > size:
        cut = rest.rfind(" ", size // 2, size)
        cut = size if cut < 0 else cut + 1
        out.append(rest[:cut])
        rest = rest[cut:]
    if rest or not out:
        out.append(rest)
    return out
