"""A fake of Meta's Graph API for the WhatsApp Cloud API, on loopback, and a webhook sender.

Graph side: ``GET /{version}/{phone_number_id}`` (the number's name), and ``POST
/{version}/{phone_number_id}/messages`` with the Cloud API's rules: a bearer token
(else 401, code 190); free text only within 24 hours of the person's last message
(else 400, code 131047 "Re-engagement message"); a template with any name the test
lists as approved; ``status: read`` (with an optional ``typing_indicator``) for a
message id it has seen; scripted errors (``fail_next``). Webhook side:
:meth:`FakeWhatsApp.post_text` posts a ``messages`` change to the bot's callback URL
signed with the app secret (``X-Hub-Signature-256``), as Meta does, and records the
person's message for the 24-hour window.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

PHONE_ID = "106540352242922"
TOKEN = "EAAG-fake-whatsapp-token"
APP_SECRET = "fake-app-secret"
VERIFY = "fake-verify-token"
WAIT_TIMEOUT_S = 15.0


class FakeWhatsApp:
    def __init__(self, *, templates: tuple[str, ...] = ("vikingbot_update",)) -> None:
        self.templates = set(templates)
        self.sent: list[dict[str, Any]] = []  # text and template messages taken
        self.reads: list[dict[str, Any]] = []  # read marks (with or without typing)
        self.failures: list[tuple[int, int, str]] = []  # (http status, code, message)
        self.last_inbound: dict[str, float] = {}  # wa_id -> when they last wrote
        self._ids = itertools.count(1)
        self._cond = threading.Condition()

    # ---- scripting (test side) ------------------------------------------

    def fail_next(self, status: int, code: int, message: str) -> None:
        with self._cond:
            self.failures.append((status, code, message))

    def payload(self, number: str, text: str, message_id: str | None = None) -> dict[str, Any]:
        """A webhook ``messages`` change for a text from ``number`` (its window opens)."""
        now = time.time()
        with self._cond:
            self.last_inbound[number] = now
            mid = message_id or f"wamid.fake{next(self._ids):06d}"
        message = {
            "from": number,
            "id": mid,
            "timestamp": str(int(now)),
            "type": "text",
            "text": {"body": text},
        }
        value = {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550001111", "phone_number_id": PHONE_ID},
            "contacts": [{"profile": {"name": "Alice"}, "wa_id": number}],
            "messages": [message],
        }
        change = {"field": "messages", "value": value}
        return {"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [change]}]}

    @staticmethod
    def sign(body: bytes, secret: str = APP_SECRET) -> str:
        return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()

    def signed(
        self, number: str, text: str, *, message_id: str | None = None, secret: str = APP_SECRET
    ) -> tuple[bytes, dict[str, str]]:
        """The body and headers of a signed webhook post for a text from ``number``."""
        body = json.dumps(self.payload(number, text, message_id)).encode()
        headers = {
            "Content-Type": "application/json",
            "X-Hub-Signature-256": self.sign(body, secret),
        }
        return body, headers

    def post_text(
        self,
        callback: str,
        number: str,
        text: str,
        *,
        message_id: str | None = None,
        secret: str = APP_SECRET,
    ) -> httpx.Response:
        """Post a signed webhook for a text from ``number`` to the bot's ``callback``."""
        body = json.dumps(self.payload(number, text, message_id)).encode()
        return httpx.post(
            callback,
            content=body,
            headers={
                "Content-Type": "application/json",
                "X-Hub-Signature-256": self.sign(body, secret),
            },
            timeout=30.0,
        )

    def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        from vikingbot.testing.server import wait_until

        wait_until(self._cond, ready, timeout, "fake WhatsApp")

    def wait_for_sent(self, n: int, timeout: float = WAIT_TIMEOUT_S) -> list[dict[str, Any]]:
        self._wait(lambda: len(self.sent) >= n, timeout)
        with self._cond:
            return list(self.sent)

    # ---- the server -----------------------------------------------------

    @staticmethod
    def _error(status: int, code: int, message: str) -> Response:
        from starlette.responses import JSONResponse

        error = {
            "message": message,
            "type": "OAuthException",
            "code": code,
            "error_data": {"messaging_product": "whatsapp", "details": message},
            "fbtrace_id": "Afake",
        }
        return JSONResponse({"error": error}, status_code=status)

    def _authorised(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {TOKEN}"

    async def _number(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._authorised(request):
            return self._error(401, 190, "Invalid OAuth access token")
        return JSONResponse(
            {
                "display_phone_number": "+1 555-000-1111",
                "verified_name": "Viking Test",
                "id": PHONE_ID,
            }
        )

    async def _messages(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._authorised(request):
            return self._error(401, 190, "Invalid OAuth access token")
        if request.path_params["phone"] != PHONE_ID:
            return self._error(400, 100, "Unsupported post request")
        body = await request.json()
        with self._cond:
            if self.failures:
                status, code, message = self.failures.pop(0)
                return self._error(status, code, message)
            if body.get("status") == "read":
                self.reads.append(body)
                self._cond.notify_all()
                return JSONResponse({"success": True})
            to, kind = str(body.get("to", "")), body.get("type")
            if kind == "text":
                last = self.last_inbound.get(to)
                if last is None or time.time() - last > 24 * 3600:
                    return self._error(
                        400, 131047, "Message failed to send because more than 24 hours have passed"
                    )
                if len(body["text"]["body"]) > 4096:
                    return self._error(
                        400, 100, "Param text['body'] must be at most 4096 characters"
                    )
            elif kind == "template":
                template = body.get("template", {})
                if template.get("name") not in self.templates:
                    return self._error(
                        404, 132001, "Template name does not exist in the translation"
                    )
                for part in template.get("components", []):
                    for param in part.get("parameters", []):
                        text = param.get("text", "")
                        if "\n" in text or "\t" in text or "     " in text or len(text) > 1024:
                            return self._error(
                                400, 132018, "There was an issue with the parameters"
                            )
            else:
                return self._error(400, 131051, "Unsupported message type")
            self.sent.append(body)
            self._cond.notify_all()
            mid = f"wamid.out{next(self._ids):06d}"
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": mid}],
            }
        )

    def app(self) -> Starlette:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(
            routes=[
                Route("/{version}/{phone}/messages", self._messages, methods=["POST"]),
                Route("/{version}/{phone}", self._number, methods=["GET"]),
            ]
        )

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Run the fake Graph API on a free loopback port; yields its base URL."""
        from vikingbot.testing.server import serve_app

        with serve_app(self.app()) as base_url:
            yield base_url
