"""A process doing units of work the way a gateway shares them (tests and benches).

    python -m vikingbot.testing.unit_worker NAME DB_URL SCHEMA|- MODEL_URL TG_API TG_TOKEN \\
        UNITS CONCURRENCY TTL_S

Each unit ``hb:ws-NNNN:task`` (one per workspace, all due) is claimed as a lease
(``vikingbot.store.leases``), answered by the model (``MODEL_URL``: an OpenAI
chat-completions endpoint, the loopback fake), and its result row plus its
outgoing message are written in one transaction under the lease's fence, which
also marks the unit done. The message is then sent to the (fake) Telegram API and
marked sent in the outbox. At most ``CONCURRENCY`` units run at once. The worker
also sweeps the outbox for messages a dead worker left pending (send lease
``TTL_S``), and stops when every unit is done and no message is pending.

Prints ``<unix time> claimed <n>`` lines as it goes and ``<unix time> finished
<claimed> <finished> <lost fences>`` at the end. Runs until killed otherwise.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        found: dict[str, Any] = json.loads(resp.read())
        return found


class Worker:
    def __init__(self, argv: list[str]) -> None:
        from vikingbot.clock import SystemClock
        from vikingbot.delivery.outbox import Outbox
        from vikingbot.store.db import StateStore
        from vikingbot.store.leases import Leases

        (self.name, url, schema, self.model_url, self.tg_api, self.tg_token) = argv[:6]
        self.units, self.concurrency, self.ttl_s = int(argv[6]), int(argv[7]), float(argv[8])
        self.store = StateStore.open(url, schema=None if schema == "-" else schema)
        self.leases = Leases(self.store, SystemClock())
        self.outbox = Outbox(self.store, sender=self.name, lease_s=self.ttl_s, dead_after_s=5.0)
        from vikingbot.gateway.registry import GatewayRegistry

        self.registry = GatewayRegistry(self.store, SystemClock(), gateway_id=self.name)
        self.registry.register()  # a live sender: its outbox rows are left to it
        self.claimed = self.finished = self.lost = 0
        self.known_done: set[str] = set()
        self._lock = threading.Lock()

    def _beat(self) -> None:
        while True:
            time.sleep(1.0)
            try:
                self.registry.beat()
            except Exception as exc:
                print(f"{time.time():.3f} beat failed: {exc}", flush=True)

    def unit_key(self, n: int) -> str:
        return f"hb:ws-{n:04d}:task"

    def run(self) -> None:
        from vikingbot.store.leases import Claim

        threading.Thread(target=self._beat, daemon=True).start()
        print("ready", flush=True)
        sys.stdin.readline()  # "go": every worker starts at once
        pool = ThreadPoolExecutor(self.concurrency)
        slots = threading.Semaphore(self.concurrency)
        offset = abs(hash(self.name)) % self.units  # gateways start at different places
        while True:
            for i in range(self.units):
                key = self.unit_key((offset + i) % self.units)
                if key in self.known_done:
                    continue
                slots.acquire()  # within max_concurrency: claim only what we can run now
                claim = self.leases.claim(key, self.name, self.ttl_s)
                if not isinstance(claim, Claim):
                    if claim.done:
                        self.known_done.add(key)
                    slots.release()
                    continue
                with self._lock:
                    self.claimed += 1
                    if self.claimed % 10 == 0:
                        print(f"{time.time():.3f} claimed {self.claimed}", flush=True)
                pool.submit(self._unit, claim, slots)
            for row in self.outbox.claim_pending(["telegram"]):
                self._send(row.dedupe_key, row.text)
            if self._all_done():
                break
            time.sleep(0.1)
        pool.shutdown(wait=True)
        print(f"{time.time():.3f} finished {self.claimed} {self.finished} {self.lost}", flush=True)

    def _all_done(self) -> bool:
        from sqlalchemy import func, select

        from vikingbot.store.tables import leases, outbox

        with self.store.engine.connect() as conn:
            done = conn.execute(
                select(func.count()).where(
                    leases.c.key.startswith("hb:"), leases.c.done_at.is_not(None)
                )
            ).scalar_one()
            pending = conn.execute(
                select(func.count()).where(outbox.c.status == "pending")
            ).scalar_one()
        return bool(done >= self.units and pending == 0)

    def _unit(self, claim: Any, slots: threading.Semaphore) -> None:
        try:
            self._work(claim)
        except Exception as exc:  # a lost lease or a database error: the unit moves on
            print(f"{time.time():.3f} unit {claim.key}: {type(exc).__name__}: {exc}", flush=True)
        finally:
            slots.release()

    def _work(self, claim: Any) -> None:
        from datetime import timedelta

        from vikingbot.store.leases import LeaseLost, store_now
        from vikingbot.store.tables import heartbeat_runs, outbox

        answer = _post(
            self.model_url + "/chat/completions",
            {"model": "fake", "messages": [{"role": "user", "content": claim.key}]},
        )
        text = f"{claim.key}: {answer['choices'][0]['message']['content']}"
        now = datetime.now(UTC)
        workspace = claim.key.split(":")[1]
        try:
            with self.leases.fenced(claim) as conn:
                conn.execute(
                    heartbeat_runs.insert().values(
                        cycle_id=self.name,
                        at=now,
                        workspace=workspace,
                        entry="task",
                        trigger="scheduled",
                        decision="run",
                        reason="due",
                        outcome="delivered",
                    )
                )
                conn.execute(
                    outbox.insert().values(
                        dedupe_key=claim.key,
                        channel="telegram",
                        channel_id="default",
                        chat_id="42",
                        text=text,
                        status="pending",
                        attempts=0,
                        created_at=now,
                        details={"parts_sent": 0},
                        sender=self.name,
                        lease_until=store_now(conn, self.leases.clock, self.leases.time_source)
                        + timedelta(seconds=self.ttl_s),
                    )
                )
                self.leases.mark_done_in(conn, claim)
        except LeaseLost:
            with self._lock:
                self.lost += 1
            return
        self._send(claim.key, text)
        with self._lock:
            self.finished += 1

    def _send(self, key: str, text: str) -> None:
        _post(f"{self.tg_api}/bot{self.tg_token}/sendMessage", {"chat_id": "42", "text": text})
        self.outbox.mark_sent(key)


if __name__ == "__main__":
    Worker(sys.argv[1:]).run()
