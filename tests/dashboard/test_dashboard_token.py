"""A gateway with a token (what a gateway bound beyond loopback must have): the
dashboard answers nothing without a session, and the token logs a browser in."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

from playwright.sync_api import expect

from tests.e2e.conftest import Home
from vikingbot.testing.gateway_proc import GatewayProcess

TOKEN = "a-long-gateway-token-for-the-test"
GATEWAY = {"token": TOKEN}


def test_nothing_is_readable_without_a_session_and_the_gateway_token_logs_in(
    home: Home, gw: GatewayProcess, browser: Any
) -> None:
    for path in ("/ui/", "/ui/inbox", "/ui/events", "/ui/runs?workspace=x"):
        req = urllib.request.Request(gw.base_url + path, headers={"hx-request": "true"})
        try:
            urllib.request.urlopen(req, timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 401, path
        else:
            raise AssertionError(f"{path} answered without a session")
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(gw.base_url + "/")
        page.fill("input[name=token]", "not-the-token")
        page.click("button[type=submit]")
        expect(page.locator(".error")).to_contain_text("not valid")
        page.fill("input[name=token]", TOKEN)
        page.click("button[type=submit]")
        expect(page.locator("h1")).to_have_text("Overview")
        expect(page.locator("#bell-count")).to_have_text("0")  # the live feed works too
    finally:
        context.close()
