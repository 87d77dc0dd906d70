"""The dashboard in a real headless Chromium (Debian's `chromium`) driven by Playwright,
against a real `vikingbot gateway` child process with the loopback fakes of tests/e2e.

Playwright's own browser download cannot work on these machines; the tests launch
the system executable. Without it they skip, except in CI (``CI`` set), where
`.ci/run` installs it and a missing browser is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import TIMEOUT_S, Home, login_url
from vikingbot.testing.fake_openai import FakeOpenAI

CHROMIUM = os.environ.get("VIKINGBOT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        message = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # module scope: the sync API runs an event loop in this thread while it is open,
    # which the asyncio tests of other modules must not find there

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def home(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Home]:
    """One home per test module (starting a gateway costs seconds): the heartbeat off,
    results for the dashboard, plus the module's ``BOT`` sections if it has them.
    Each test works in workspaces of its own."""
    bot = dict(getattr(request.module, "BOT", {}))
    gateway = bot.pop("gateway", {})
    with FakeOpenAI.start() as fake_llm:
        fake_tg = FakeTelegram()
        with fake_tg.serve() as api:
            h = Home(tmp_path_factory.mktemp("dash") / "home", fake_llm, fake_tg, api)
            h.write_config(
                heartbeat={"enabled": False, "timezone": "UTC", "target": "dashboard"},
                gateway={"shutdown_grace_s": 5, **gateway},
                **bot,
            )
            yield h


@pytest.fixture(scope="module")
def gw(home: Home) -> Iterator[GatewayProcess]:
    proc = GatewayProcess(home.path, start_timeout_s=TIMEOUT_S).start()
    yield proc
    if proc.proc is not None and proc.proc.poll() is None:
        proc.kill()


@pytest.fixture(scope="module")
def logged_in(browser: Any, home: Home, gw: GatewayProcess) -> Any:
    """The module's dashboard session: its browser storage (the session cookie) after
    one login through a `vikingbot dashboard --no-open` link. A login per test cost a
    CLI process each; logging in is tested on its own (test_dashboard_browser)."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(login_url(home))
        assert page.url.endswith("/ui/"), page.url
        return context.storage_state()
    finally:
        context.close()


@pytest.fixture
def page(browser: Any, gw: GatewayProcess, logged_in: Any) -> Iterator[Any]:
    """A logged-in page: a fresh browser context holding the module's session cookie."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, storage_state=logged_in)
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.goto(gw.base_url + "/ui/")
    assert page.url.endswith("/ui/"), page.url  # the session let it in (no login form)
    yield page
    context.close()
