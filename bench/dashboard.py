"""Dashboard figures (issue 13), against a real gateway with 10,000 sessions.

The home: 10,000 per-session workspaces (1% with a task), a fake OpenAI server
answering at once, the heartbeat on with target `dashboard`, and 14 days of
ledger history. The gateway runs its own first cycle over all of it before
anything is measured; between samples 100 sessions get a new message (the
state a real gateway serves, not a warmed cache).

1. Overview and Workspaces pages: server time (HTTP request to last byte, cold
   first request and median of 5) beside `/health` (the gateway's cheapest answer)
   as the baseline; time to first contentful paint in headless Chromium, a fresh
   browser context (cold cache) per sample, median of 5. Target: under 500 ms.
2. From a delivery (DeliveryService.deliver to `dashboard`, in another process's
   runtime on the same home) to the bell count changing in an open page, median of
   5. Target: under 1 s.
3. Bytes transferred for the first load of the overview in a fresh context
   (document + CSS + scripts). Target: under 200 kB.

    uv run --dev python bench/dashboard.py [--sessions 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support

from _heartbeat_setup import TEMPLATE, with_tasks, write_session

from tests.support.gateway_proc import GatewayProcess
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI, reply

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def build_home(home: Path, n: int, llm_url: str) -> None:
    from vikingbot.config.schema import Config
    from vikingbot.workspace.manager import WorkspaceManager

    config = {
        "bot": {
            "sandbox": {"mode": "per-session"},
            "agents": {"provider": "openai", "model": "fake"},
            "providers": {"openai": {"api_base": llm_url, "api_key": "k", "max_retries": 0}},
            "channels": {"cli": {"enabled": False}},
            "heartbeat": {"timezone": "UTC", "target": "dashboard", "interval_seconds": 600},
        }
    }
    home.mkdir(parents=True)
    (home / "config.json").write_text(json.dumps(config))
    cfg = Config.model_validate(config)
    workspaces = WorkspaceManager(home / "data" / "workspace", cfg.bot.sandbox.mode)
    now = datetime.now(UTC) - timedelta(minutes=5)
    for i in range(n):
        key = SessionKey("telegram", "default", f"user{i}")
        write_session(home / "data" / "sessions", key, now)
        ws = workspaces.path_for(key)
        ws.mkdir(parents=True, exist_ok=True)
        text = with_tasks("- Check the inbox") if i % 100 == 0 else TEMPLATE
        (ws / "HEARTBEAT.md").write_text(text)


def seed_history(home: Path, days: int = 14, per_day: int = 300) -> None:
    """Past ledger rows (runs with model calls) so the overview's chart has 14 days."""
    from vikingbot.heartbeat.state import HeartbeatState, LedgerRow
    from vikingbot.store.db import StateStore

    store = StateStore.open(f"sqlite:///{home / 'data' / 'state.db'}")
    state = HeartbeatState(store)
    now = datetime.now(UTC)
    rows = []
    for d in range(1, days):
        at = now - timedelta(days=d)
        for i in range(per_day):
            rows.append(
                LedgerRow(
                    f"hist-{d}",
                    at,
                    f"ws{i % 50}",
                    "scheduled",
                    "run",
                    "due",
                    outcome="ok-empty",
                    model_calls=1 + i % 3,
                    tokens_in=900,
                    tokens_out=40,
                    cost_usd=0.0004,
                )
            )
    state.record(rows)
    store.close()


def touch_sessions(home: Path, start: int, count: int = 100) -> None:
    """New user messages in some sessions (what a live home sees between page loads)."""
    now = datetime.now(UTC)
    for i in range(start, start + count):
        write_session(
            home / "data" / "sessions", SessionKey("telegram", "default", f"user{i}"), now
        )


def login(gw: GatewayProcess, home: Path) -> str:
    secret = (home / "run" / "control.secret").read_text().strip()
    req = urllib.request.Request(
        gw.base_url + "/ui/login-token",
        method="POST",
        headers={"Authorization": f"Bearer {secret}"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return gw.base_url + str(json.loads(resp.read())["path"])


def session_cookie(url: str) -> str:
    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    try:
        urllib.request.build_opener(Keep()).open(url, timeout=30)
    except urllib.error.HTTPError as exc:
        return str(exc.headers["set-cookie"]).split(";")[0]
    raise RuntimeError("login did not redirect")


def server_ms(gw: GatewayProcess, path: str, cookie: str) -> float:
    req = urllib.request.Request(gw.base_url + path, headers={"Cookie": cookie})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=60) as resp:
        resp.read()
    return (time.perf_counter() - t0) * 1000


def wait_first_cycle(home: Path, timeout_s: float = 300) -> float:
    from vikingbot.heartbeat.state import HeartbeatState
    from vikingbot.store.db import StateStore

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        store = StateStore.open(f"sqlite:///{home / 'data' / 'state.db'}")
        try:
            last = HeartbeatState(store).workspace("*").last_cycle_at
        finally:
            store.close()
        if last is not None:
            return time.monotonic() - t0
        time.sleep(0.5)
    raise RuntimeError("the gateway's first heartbeat cycle did not finish")


def paint_ms(browser: Any, login_url: str, url: str) -> tuple[float, int]:
    """(first contentful paint in ms, bytes transferred) for ``url`` in a cold context."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(login_url)  # sets the cookie; lands on the overview
        fresh = context.new_page()
        cdp = context.new_cdp_session(fresh)
        cdp.send("Network.enable")
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        got: list[float] = []
        cdp.on("Network.loadingFinished", lambda e: got.append(float(e["encodedDataLength"])))
        fresh.goto(url, wait_until="load")
        fcp = None
        for _ in range(40):  # the paint entry is recorded just after the frame
            fcp = fresh.evaluate(
                "() => (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime"
            )
            if fcp is not None:
                break
            fresh.wait_for_timeout(50)
        fresh.wait_for_timeout(200)  # late loadingFinished events
        return float(fcp or "nan"), int(sum(got))
    finally:
        context.close()


async def deliver_once(rt: Any, n: int) -> None:
    await rt.delivery.deliver(
        f"bench result {n}", "dashboard", dedupe_key=f"bench-{uuid.uuid4()}", source="bench"
    )


def bell_latency(browser: Any, login_url: str, home: Path, rounds: int = 5) -> list[float]:
    from playwright.sync_api import expect

    from vikingbot.config.loader import load_config
    from vikingbot.gateway.compose import build_home

    env = {"VIKINGBOT_HOME": str(home)}
    config, paths = load_config(home / "config.json", create=False, environ=env)
    assert paths.home == home, paths
    rt = build_home(config, paths, environ=env)
    context = browser.new_context()
    out = []
    try:
        page = context.new_page()
        page.goto(login_url)
        page.goto(login_url.split("/ui/")[0] + "/ui/inbox")
        expect(page.locator("#bell-count")).not_to_have_text("…")
        for n in range(rounds):
            before = page.locator("#bell-count").inner_text()
            page.evaluate(
                """() => { window.__changed = null;
                const el = document.getElementById('bell-count');
                new MutationObserver(() => { if (window.__changed === null)
                  window.__changed = performance.timeOrigin + performance.now(); })
                  .observe(el, {childList: true, characterData: true, subtree: true}); }"""
            )
            t0 = time.time() * 1000
            # the sync browser API holds this thread's event loop: deliver from another thread
            worker = threading.Thread(target=asyncio.run, args=(deliver_once(rt, n),))
            worker.start()
            worker.join()
            expect(page.locator("#bell-count")).not_to_have_text(before, timeout=10_000)
            out.append(float(page.evaluate("window.__changed")) - t0)
            page.wait_for_timeout(300)
    finally:
        context.close()
        rt.close()
    return out


def med(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from loguru import logger

    logger.remove()  # this process's own debug lines would mix with the figures
    tmp = Path(tempfile.mkdtemp(prefix="vb-dash-bench-"))
    home = tmp / "home"
    from playwright.sync_api import sync_playwright

    try:
        with FakeOpenAI.start(default=reply("HEARTBEAT_OK")) as llm:
            t0 = time.monotonic()
            build_home(home, args.sessions, llm.base_url)
            print(
                f"home: {args.sessions} sessions in per-session workspaces "
                f"({time.monotonic() - t0:.1f} s to write)"
            )
            with GatewayProcess(home, start_timeout_s=120) as gw:
                took = wait_first_cycle(home)
                print(f"gateway: first heartbeat cycle over them done {took:.1f} s after start")
                seed_history(home)
                url = login(gw, home)
                cookie = session_cookie(url)
                rows: dict[str, list[float]] = {"/health": [], "/ui/": [], "/ui/workspaces": []}
                cold = {p: server_ms(gw, p, cookie) for p in rows}
                for i in range(args.repeat):
                    touch_sessions(home, i * 100)
                    for p in rows:
                        rows[p].append(server_ms(gw, p, cookie))
                for p, values in rows.items():
                    label = {
                        "/health": "baseline /health",
                        "/ui/": "overview",
                        "/ui/workspaces": "workspaces",
                    }[p]
                    print(
                        f"server time {label:<17} cold {cold[p]:.0f} ms, median of {args.repeat}: "
                        f"{med(values)}" + ("" if p == "/health" else "  (target < 500 ms)")
                    )
                with sync_playwright() as pw:
                    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                    for label, path in (("overview", "/ui/"), ("workspaces", "/ui/workspaces")):
                        paints, sizes = [], []
                        for i in range(args.repeat):
                            touch_sessions(home, 5000 + i * 100)
                            fcp, size = paint_ms(browser, login(gw, home), gw.base_url + path)
                            paints.append(fcp)
                            sizes.append(size)
                        print(
                            f"first contentful paint {label:<10} median of {args.repeat}: "
                            f"{med(paints)}  (target < 500 ms)"
                        )
                        if label == "overview":
                            kb = sizes[0] / 1024
                            print(
                                f"first load of the overview: {kb:.1f} kB transferred "
                                f"(document, CSS, scripts; target < 200 kB)"
                            )
                    lat = bell_latency(browser, login(gw, home), home, args.repeat)
                    print(
                        f"delivery -> bell count changed in the open page: median of "
                        f"{len(lat)} {med(lat)}, max {max(lat):.0f} ms  (target < 1000 ms)"
                    )
                    browser.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
