"""The dashboard guard in front of the chat form's files (in process): login first, the
CSRF token read from the multipart body, the form parsed once and handed to the route,
the raised body limit for ``/chat/`` only."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from vikingbot.dashboard.auth import COOKIE, Auth
from vikingbot.dashboard.guard import FORM_STATE, Guard


@pytest.fixture
def rig() -> tuple[TestClient, str, list[Any]]:
    reached: list[Any] = []

    async def seen(request: Request) -> JSONResponse:
        form = request.scope["state"].get(FORM_STATE)
        names = [] if form is None else [f.filename for f in form.getlist("files")]
        data = [] if form is None else [await f.read() for f in form.getlist("files")]
        reached.append(data)
        return JSONResponse({"files": names})

    app = Starlette(routes=[Route("/chat/x", seen, methods=["POST"]), Route("/other", seen, methods=["POST"])])  # fmt: skip
    auth = Auth(lambda: ["secret"])
    login = auth.login("secret")
    assert login is not None
    sid, session = login
    client = TestClient(Guard(app, auth), base_url="http://127.0.0.1")
    client.cookies.set(COOKIE, sid)
    return client, session.csrf, reached


def test_a_chat_form_with_files_passes_with_its_token_only(
    rig: tuple[TestClient, str, list[Any]],
) -> None:
    client, csrf, reached = rig
    big = b"\xff" * (2 * 1024 * 1024)  # over the 1 MiB of other dashboard forms
    ok = client.post("/chat/x", data={"csrf": csrf, "text": "hi"}, files={"files": ("a.jpg", big)})
    assert ok.status_code == 200 and ok.json() == {"files": ["a.jpg"]}
    assert reached == [[big]]  # the route read the upload the guard parsed
    no_token = client.post("/chat/x", data={"text": "hi"}, files={"files": ("a.jpg", b"x")})
    assert no_token.status_code == 403 and "CSRF" in no_token.text
    elsewhere = client.post("/other", data={"csrf": csrf}, files={"files": ("a.jpg", big)})
    assert elsewhere.status_code == 413
    many = [("files", (f"{n}.jpg", b"x")) for n in range(21)]
    refused = client.post("/chat/x", data={"csrf": csrf}, files=many)
    assert refused.status_code == 400 and "at most 20 files" in refused.text
    client.cookies.clear()
    anonymous = client.post("/chat/x", data={"csrf": csrf}, files={"files": ("a.jpg", b"x")})
    assert anonymous.status_code == 401
    assert len(reached) == 1
