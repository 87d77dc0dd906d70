"""Screenshots of every dashboard page for docs/img/ (and the README's overview).

A real gateway on a small home: three workspaces (one HEARTBEAT.md with a
malformed entry), a fake OpenAI model, heartbeat results for the dashboard, a
chat in a slot, a cron job, a refused delivery target in the audit log, and two
weeks of ledger history for the chart. Headless Chromium takes the pictures.

    uv run --dev python bench/dashboard_screens.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support

from _heartbeat_setup import with_tasks
from dashboard import ARGS, CHROMIUM, login, seed_history

from tests.support.gateway_proc import GatewayProcess
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message, SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI, reply

PAGES = [
    ("overview", "/ui/"),
    ("workspaces", "/ui/workspaces"),
    ("workspace", "/ui/w/shared"),
    ("runs", "/ui/runs"),
    ("inbox", "/ui/inbox"),
    ("chat", "/ui/chat/research"),
    ("cron", "/ui/cron"),
    ("audit", "/ui/audit"),
]


def build(home: Path, llm_url: str) -> None:
    config = {
        "bot": {
            "agents": {"provider": "openai", "model": "gpt-4o-mini"},
            "providers": {"openai": {"api_base": llm_url, "api_key": "k", "max_retries": 0}},
            "channels": {"cli": {"enabled": False}},
            "heartbeat": {
                "enabled": False,
                "timezone": "UTC",
                "target": "dashboard",
                "budget": {"daily_tokens": 200000},
            },
        }
    }
    home.mkdir(parents=True)
    (home / "config.json").write_text(json.dumps(config, indent=2))
    root = home / "data" / "workspace"
    files = {
        "shared": with_tasks(
            "- Check whether the nightly build is green",
            "- every: 30m title: Inbox sweep task: Summarise new mail from my accountant",
            "- every: soon title: Backups task: Check last night's backup",
            "- Post the weekly report <!-- deliver:slack:#random -->",
        ),
        "research": with_tasks("- Watch arXiv for new papers on retrieval"),
        "home-lab": with_tasks("- daily: 07:30 title: Disk space task: Warn me under 10% free"),
    }
    for name, text in files.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "HEARTBEAT.md").write_text(text)
    store = SessionStore(home / "data" / "sessions")
    key = SessionKey("telegram", "default", "4242")
    store.get_or_create(key)
    store.append(key, Message(role="user", content="hi", timestamp=datetime.now(UTC)))


def add_cron(home: Path) -> None:
    from vikingbot.cron.jobs import CronJobs
    from vikingbot.store.db import StateStore

    store = StateStore.open(f"sqlite:///{home / 'data' / 'state.db'}")
    jobs = CronJobs(store)
    jobs.add(
        "morning-brief",
        "cron",
        "0 7 * * 1-5",
        "Give me a short brief of today's calendar",
        timezone="Europe/Oslo",
        target="dashboard:brief",
    )
    jobs.add("invoice-check", "every", "6h", "Look for unpaid invoices in the shared folder")
    store.close()


def refused_delivery(home: Path) -> None:
    """A result for a chat nobody allowed: refused, audited, sent to the inbox instead."""
    import asyncio

    from vikingbot.config.loader import load_config
    from vikingbot.gateway.compose import build_home

    env = {"VIKINGBOT_HOME": str(home)}
    config, paths = load_config(home / "config.json", create=False, environ=env)
    rt = build_home(config, paths, environ=env)
    report = rt.delivery.deliver(
        "Weekly report: 14 tickets closed, 3 opened.",
        "slack:#random",
        dedupe_key="screens-1",
        source="heartbeat:shared",
    )
    asyncio.run(report)
    rt.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs/img")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="vb-dash-shots-"))
    home = tmp / "home"
    from loguru import logger
    from playwright.sync_api import expect, sync_playwright

    logger.remove()
    script = [
        reply(
            "**Nightly build is red** since 02:10: `test_sync` fails on main.\n\n"
            "- last green: 01:40\n- suspect: the retry change in `sync.py`"
        ),
        reply("HEARTBEAT_OK"),
        reply("Weekly report posted: 14 tickets closed, 3 opened."),
        reply(
            "Three new papers on retrieval today; the most relevant is a study of "
            "late-interaction rerankers on long documents."
        ),
    ]
    try:
        with FakeOpenAI.start(default=reply("HEARTBEAT_OK")) as llm:
            build(home, llm.base_url)
            llm.script(script)
            with GatewayProcess(home, start_timeout_s=120) as gw:
                add_cron(home)
                refused_delivery(home)
                seed_history(home, per_day=40)
                with sync_playwright() as pw:
                    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                    context = browser.new_context(viewport={"width": 1280, "height": 860})
                    page = context.new_page()
                    page.goto(login(gw, home))
                    page.goto(gw.base_url + "/ui/w/research")
                    page.click("text=Pause")
                    page.click("text=Resume")
                    page.goto(gw.base_url + "/ui/w/shared")
                    page.click("#run-now")
                    page.goto(gw.base_url + "/ui/inbox")
                    expect(page.locator("#inbox-list article").first).to_be_visible(timeout=30_000)
                    cli = [sys.executable, "-m", "vikingbot", "heartbeat", "run-now", "--force"]
                    env = {**os.environ, "VIKINGBOT_HOME": str(home)}
                    subprocess.run(cli, env=env, capture_output=True, timeout=120, check=True)
                    page.goto(gw.base_url + "/ui/chat/research")
                    llm.script(["You asked for papers: see the list in the *research* slot."])
                    page.fill("textarea[name=text]", "Anything new on retrieval?")
                    page.click(".chat-form button")
                    expect(page.locator("#chat-log .assistant")).to_be_visible(timeout=30_000)
                    for name, path in PAGES:
                        page.goto(gw.base_url + path)
                        page.wait_for_timeout(400)  # the bell's first reading
                        target = out / f"dashboard-{name}.png"
                        page.screenshot(path=str(target), full_page=name != "workspace")
                        print(f"wrote {target}")
                    browser.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
