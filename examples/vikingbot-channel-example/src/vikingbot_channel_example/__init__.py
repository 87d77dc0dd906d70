"""A channel that writes messages as JSON lines to a file and takes inbound ones over HTTP."""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.channels.base import Channel, Problems, has_secret
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelError


class JsonlSettings(ChannelBase):
    """``bot.channels.jsonl``: the common channel keys plus these."""

    path: Path | None = None
    inbound_token: SecretStr | None = None


class JsonlChannel(Channel):
    name: ClassVar[str] = "jsonl"
    settings: ClassVar[type[ChannelBase]] = JsonlSettings
    max_message_chars: ClassVar[int | None] = None

    def __init__(self, config: ChannelBase, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        assert isinstance(config, JsonlSettings)
        self.jsonl = config

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, JsonlSettings)
        missing = [] if section.path else ["path"]
        notes = [] if has_secret(section.inbound_token) else ["no inbound_token: inbound is off"]
        return Problems(missing, notes)

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus

    async def stop(self) -> None:
        self._bus = None

    async def send(self, msg: OutboundMessage) -> None:
        if self.jsonl.path is None:
            raise ChannelError("jsonl channel has no path")
        line = json.dumps(
            {
                "chat_id": msg.chat_id,
                "thread": msg.thread,
                "text": msg.text,
                "dedupe_key": msg.dedupe_key,
            }
        )
        try:
            await asyncio.to_thread(_append, self.jsonl.path, line)
        except OSError as exc:
            raise ChannelError(f"jsonl: cannot write {self.jsonl.path}: {exc}") from exc

    def routes(self) -> Sequence[BaseRoute]:
        return [Route("/inbound", self._inbound, methods=["POST"])]

    async def _inbound(self, request: Request) -> Response:
        token = self.jsonl.inbound_token
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if token is None or not hmac.compare_digest(given, token.get_secret_value()):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        try:
            body = json.loads(await request.body())
            msg = InboundMessage(
                channel=self.name,
                sender_id=str(body["sender_id"]),
                chat_id=str(body["chat_id"]),
                text=str(body["text"]),
            )
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "expected {sender_id, chat_id, text}"}, status_code=400)
        if not await self.accept(msg):
            return JSONResponse({"error": "sender is not allowed"}, status_code=403)
        return JSONResponse({"accepted": True}, status_code=202)


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
