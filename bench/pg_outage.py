"""A 30-second PostgreSQL outage under a running gateway (issue 17 item 5).

    uv run --all-extras --dev python bench/pg_outage.py [--cut-s 30] [--pg-url URL]

A real ``vikingbot gateway`` process (fake model, fake Telegram) reaches its
PostgreSQL schema through ``tests.support.pg_proxy`` on loopback. After the
first heartbeat cycle the proxy cuts every connection for ``--cut-s`` seconds;
meanwhile the owner writes to the bot on Telegram. Prints:

- whether the gateway process stayed up, and how long until ``/health`` said
  ``degraded``;
- the time from the database's return to the next heartbeat cycle (the cycle that
  was due during the cut), beside the configured interval as the baseline;
- the time from the database's return to the answer of the chat written during
  the cut, and how many answers Telegram got (target 1).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from sqlalchemy import select

from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.pg_proxy import PgProxy
from vikingbot.store.db import StateStore
from vikingbot.store.tables import heartbeat_workspaces
from vikingbot.testing.fake_openai import FakeOpenAI

INTERVAL_S = 10  # the smallest heartbeat interval the config allows
OWNER = 42


def _last_cycle(store: StateStore) -> datetime | None:
    with store.engine.connect() as conn:
        found: datetime | None = conn.execute(
            select(heartbeat_workspaces.c.last_cycle_at).where(
                heartbeat_workspaces.c.workspace == "*"
            )
        ).scalar_one_or_none()
        return found


def _wait(check: Any, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)
    return time.time()


def _config(home: Path, url: str, llm: FakeOpenAI, tg: FakeTelegram, tg_api: str) -> None:
    config = {
        "bot": {
            "owner": f"telegram:{OWNER}",
            "agents": {"provider": "openai", "model": "fake-model"},
            "providers": {
                "openai": {"api_base": llm.base_url, "api_key": "sk-x", "max_retries": 0}
            },
            "channels": {
                "cli": {"enabled": False},
                "telegram": {
                    "enabled": True,
                    "token": tg.token,
                    "api_base": tg_api,
                    "allow_from": [str(OWNER)],
                },
            },
            "heartbeat": {"timezone": "UTC", "interval_seconds": INTERVAL_S},
            "gateway": {"shutdown_grace_s": 5},
        },
        "storage": {"database_url": url},
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config, indent=2))
    ws = home / "data" / "workspace" / "shared"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "HEARTBEAT.md").write_text("# Heartbeat Tasks\n\n## Active Tasks\n\n- check the mail\n")


def main() -> None:
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cut-s", type=float, default=30.0)
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    direct = StateStore.open(args.pg_url, schema=schema)  # the bench's own view, no proxy
    tg = FakeTelegram()
    try:
        with (
            TemporaryDirectory() as tmp,
            FakeOpenAI.start() as llm,
            tg.serve() as tg_api,
            PgProxy() as proxy,
        ):
            url = proxy.url(args.pg_url) + f"?options=-csearch_path%3D{schema}"
            home = Path(tmp) / "home"
            _config(home, url, llm, tg, tg_api)
            with GatewayProcess(home, start_timeout_s=120) as gw:
                _wait(lambda: _last_cycle(direct) is not None, 120, "the first cycle")
                first = _last_cycle(direct)
                proxy.cut()
                cut_at = time.time()
                degraded_at = _wait(
                    lambda: gw.get("/health", timeout=5).get("status") == "degraded",
                    args.cut_s,
                    "/health to say degraded",
                )
                llm.script(["Yes, I am here."])  # the chat's answer (the heartbeat waits)
                tg.push_text(chat_id=OWNER, user_id=OWNER, text="are you there?")
                time.sleep(max(0.0, cut_at + args.cut_s - time.time()))
                alive = gw.proc is not None and gw.proc.poll() is None
                proxy.restore()
                back = time.time()
                back_dt = datetime.fromtimestamp(back, UTC)
                cycled_at = _wait(
                    lambda: (_last_cycle(direct) or back_dt) > back_dt, 120, "the next cycle"
                )
                try:
                    answered_at = _wait(lambda: len(tg.sent) >= 1, 120, "the chat's answer")
                except SystemExit:
                    Path("pg_outage_gateway.log").write_text(gw.read_output())
                    print("the gateway's output: pg_outage_gateway.log")
                    raise
                time.sleep(2.0)  # anything sent twice would arrive now
                health = gw.get("/health", timeout=5)
        print(
            f"PostgreSQL cut for {args.cut_s:.0f} s under a running gateway (interval "
            f"{INTERVAL_S} s, first cycle at {first:%H:%M:%S})"
        )
        print(f"  gateway process alive through the cut: {alive}")
        print(f"  /health said degraded after:           {degraded_at - cut_at:5.1f} s")
        print(
            f"  database back -> next heartbeat cycle:   {cycled_at - back:5.1f} s "
            f"(baseline: a cycle every {INTERVAL_S} s)"
        )
        print(
            f"  database back -> chat answered:          {answered_at - back:5.1f} s "
            f"(answers sent: {len(tg.sent)}, target 1)"
        )
        print(f"  /health after the return:              {health.get('status')}")
        for sent in tg.sent:
            print(f"  sent to Telegram: {sent['text'][:70]!r}")
    finally:
        direct.close()
        with psycopg.connect(args.pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()
