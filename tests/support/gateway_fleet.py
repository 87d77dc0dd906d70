"""Real ``vikingbot gateway`` processes on one home and one PostgreSQL schema (issue 14).

Shared by ``tests/multigw/test_gateway_fleet.py`` (small numbers) and
``bench/multigw.py`` (the issue's numbers)::

    run = run_gateways(pg_url, tmp, gateways=4, units=1000, kills=1)
    run.duplicates, run.lost, run.delivered_twice, run.undelivered   # all 0

The home holds ``units`` per-session workspaces, each with one due per-task
entry ``Report on unit-NNNN`` and a session active a minute ago. The fake model
(``FakeOpenAI``) answers every turn at once with ``Done unit-NNNN``; the result
goes to the owner's chat on a fake Telegram. The gateways run the heartbeat
every 10 s with ``bot.gateway.lease_s`` = ``lease_s``. With ``kills`` = k the
first k gateways are SIGKILLed one after another, each while it holds heartbeat
claims (mid-cycle), after 1/(k+1), 2/(k+1), ... of the units were delivered; the
others must take their work over.

Counted per unit, from three independent places: model calls at the fake model,
``run`` rows in the heartbeat ledger, and messages the fake Telegram received.
A message Telegram got twice is put down to its outbox row when the row says it
was taken over while possibly sent (``details.taken_in_flight``: its sender died
with it on the wire); any other is counted apart (``twice_other``). The surviving
gateways' ``vikingbot_outbox_resent_after_crash_total`` is summed beside it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from vikingbot.testing.fake_openai import FakeOpenAI, RecordedRequest, Step, reply

OWNER_ID = 4242
UNIT = re.compile(r"unit-(\d{4,})")
TEMPLATE = (
    "# Heartbeat Tasks\n\n## Active Tasks\n\n<!-- Add your periodic tasks below this line -->\n\n"
    "{tasks}\n## Completed\n\n<!-- Move completed tasks here or delete them -->\n"
)


@dataclass
class FleetRun:
    gateways: int
    units: int
    seconds: float  # from the first gateway's start to the last unit delivered and recorded
    model_calls: Counter[int] = field(default_factory=Counter)  # per unit
    ledger: Counter[int] = field(default_factory=Counter)  # "run" rows per unit
    delivered: Counter[int] = field(default_factory=Counter)  # Telegram messages per unit
    pending_outbox: int = 0
    killed: int = 0  # gateways SIGKILLed while they held heartbeat claims
    by_gateway: tuple[int, ...] = ()  # units each gateway ran (done heartbeat claims)
    started_in_s: float = 0.0  # until every gateway answered /health
    work_s: float = 0.0  # database time from the first unit claimed to the last finished
    in_flight: Counter[int] = field(default_factory=Counter)  # outbox take-overs in flight
    resent_metric: int = 0  # vikingbot_outbox_resent_after_crash_total, surviving gateways

    def _extra(self, counts: Counter[int]) -> int:
        return sum(n - 1 for n in counts.values() if n > 1)

    @property
    def duplicates(self) -> int:
        """Units that fired more than once: ledger rows beyond one per unit."""
        return self._extra(self.ledger)

    @property
    def turns_repeated(self) -> int:
        """Model calls beyond one per unit: turns a killed gateway had started and not
        delivered, run again by the gateway that took the unit over (nothing of the
        first one reached the user or the ledger)."""
        return self._extra(self.model_calls)

    @property
    def lost(self) -> int:
        """Units never recorded as run."""
        return sum(1 for n in range(self.units) if self.ledger[n] == 0)

    @property
    def delivered_twice(self) -> int:
        """Messages Telegram got beyond one per unit (a send on the wire when its
        gateway was killed is sent again by the gateway that takes the row over)."""
        return self._extra(self.delivered)

    @property
    def twice_in_flight(self) -> int:
        """Messages Telegram got twice whose outbox row was taken over while possibly
        sent (a send on the wire when its gateway died): the known kind."""
        return sum(min(n - 1, self.in_flight[unit]) for unit, n in self.delivered.items() if n > 1)

    @property
    def twice_other(self) -> int:
        """Messages Telegram got twice for any other reason (target 0)."""
        return self.delivered_twice - self.twice_in_flight

    @property
    def undelivered(self) -> int:
        return sum(1 for n in range(self.units) if self.delivered[n] == 0)

    @property
    def per_second(self) -> float:
        return self.units / self.seconds if self.seconds > 0 else 0.0

    @property
    def work_per_second(self) -> float:
        """Units claimed and finished per second, start-up not counted."""
        return self.units / self.work_s if self.work_s > 0 else 0.0


def _answer(request: RecordedRequest) -> Step:
    found = UNIT.search(request.last_user_text)
    return reply(f"Done unit-{found.group(1)}." if found else "HEARTBEAT_OK")


def build_home(
    home: Path,
    db_url: str,
    *,
    units: int,
    model_url: str,
    tg_api: str,
    tg_token: str,
    lease_s: float,
) -> dict[str, int]:
    """The shared home; returns workspace name -> unit number."""
    from vikingbot.session import codec
    from vikingbot.session.types import Message, SessionKey, SessionMeta
    from vikingbot.workspace.manager import checked_name

    config: dict[str, Any] = {
        "bot": {
            "owner": f"telegram:{OWNER_ID}",
            "agents": {"provider": "openai", "model": "fake-model"},
            "providers": {"openai": {"api_base": model_url, "api_key": "sk-x", "max_retries": 0}},
            "channels": {
                "cli": {"enabled": False},
                "telegram": {
                    "enabled": True,
                    "token": tg_token,
                    "api_base": tg_api,
                    "allow_from": [str(OWNER_ID)],
                },
            },
            "sandbox": {"mode": "per-session"},
            "heartbeat": {
                "timezone": "UTC",
                "mode": "per-task",
                "interval_seconds": 10,
                "max_concurrency": 4,
                "task_timeout_s": 60,
            },
            "gateway": {"shutdown_grace_s": 1, "lease_s": lease_s},
        },
        "storage": {"database_url": db_url},
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config))
    sessions = home / "data" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    root = home / "data" / "workspace"
    at = datetime.now(UTC) - timedelta(minutes=1)
    names: dict[str, int] = {}
    for n in range(units):
        key = SessionKey("telegram", "default", f"user{n}")
        meta = SessionMeta(key, created_at=at, updated_at=at, last_user_at=at)
        msg = Message(role="user", content="hi", timestamp=at)
        lines = [codec.meta_to_obj(meta), codec.message_to_obj(msg)]
        (sessions / codec.key_to_filename(key)).write_bytes(
            b"".join(codec.dumps_line(x) for x in lines)
        )
        name = checked_name(key, "per-session")
        (root / name).mkdir(parents=True, exist_ok=True)
        task = f"- Report on unit-{n:04d}\n"
        (root / name / "HEARTBEAT.md").write_text(TEMPLATE.format(tasks=task))
        names[name] = n
    return names


def run_gateways(
    pg_url: str,
    work: Path,
    *,
    gateways: int,
    units: int,
    kills: int = 0,
    lease_s: float = 8.0,
    timeout_s: float = 300.0,
) -> FleetRun:
    """Run the fleet on a fresh schema of ``pg_url`` (dropped after) and count."""
    import psycopg

    from vikingbot.store.db import StateStore

    schema = f"gwfleet_{uuid.uuid4().hex[:12]}"
    StateStore.open(pg_url, schema=schema).close()  # migrated once, before the race
    db_url = pg_url + f"?options=-csearch_path%3D{schema}"
    telegram = FakeTelegram(max_poll_s=0.5)
    procs: list[GatewayProcess] = []
    try:
        with FakeOpenAI.start() as model, telegram.serve() as tg_api:
            model.responder = _answer
            home = work / "home"
            names = build_home(
                home,
                db_url,
                units=units,
                model_url=model.base_url,
                tg_api=tg_api,
                tg_token=telegram.token,
                lease_s=lease_s,
            )
            store = StateStore.open(db_url)
            try:
                run = _drive(store, home, procs, telegram, gateways, units, kills, timeout_s)
                run.model_calls = Counter(
                    int(m.group(1))
                    for r in model.requests
                    if (m := UNIT.search(r.last_user_text)) is not None
                )
                _count(store, run, names, telegram, procs)
            finally:
                for gw in procs:
                    gw.stop(timeout=30)
                store.close()
            return run
    finally:
        for gw in procs:
            gw.kill()
        if not os.environ.get("VIKINGBOT_FLEET_KEEP"):  # kept to look into a failure
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _drive(
    store: Any,
    home: Path,
    procs: list[GatewayProcess],
    telegram: FakeTelegram,
    gateways: int,
    units: int,
    kills: int,
    timeout_s: float,
) -> FleetRun:
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    procs += [
        GatewayProcess(home, start_timeout_s=120, log=home / f"gateway-{n}.out")
        for n in range(gateways)
    ]
    with ThreadPoolExecutor(gateways) as pool:  # all at once, as a fleet restarts
        list(pool.map(GatewayProcess.start, procs))
    run = FleetRun(gateways, units, 0.0, started_in_s=time.monotonic() - t0)
    assert kills < gateways, "one gateway must survive"
    while True:
        got = {int(m.group(1)) for s in telegram.sent if (m := UNIT.search(s["text"]))}
        if run.killed < kills:  # the next victim, once its share of the units went out
            victim = procs[run.killed]
            due = len(got) >= units * (run.killed + 1) // (kills + 1)
            if due and _holds(store, victim):
                assert victim.proc is not None
                victim.proc.send_signal(signal.SIGKILL)
                victim.proc.wait()
                run.killed += 1
        if len(got) >= units and _recorded(store) >= units and _pending(store) == 0:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    run.seconds = time.monotonic() - t0
    return run


def _holds(store: Any, gw: GatewayProcess) -> bool:
    """Whether gateway ``gw`` holds a live heartbeat claim right now."""
    from sqlalchemy import func, select

    from vikingbot.store.tables import leases

    assert gw.proc is not None
    with store.engine.connect() as conn:
        n = conn.execute(
            select(func.count()).where(
                leases.c.key.startswith("hb:"),
                leases.c.owner.endswith(f":{gw.proc.pid}"),
                leases.c.done_at.is_(None),
                leases.c.expires_at > func.clock_timestamp(),
            )
        ).scalar_one()
    return bool(n)


def _recorded(store: Any) -> int:
    from sqlalchemy import distinct, func, select

    from vikingbot.store.tables import heartbeat_runs

    with store.engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count(distinct(heartbeat_runs.c.workspace))).where(
                    heartbeat_runs.c.decision == "run"
                )
            ).scalar_one()
        )


def _pending(store: Any) -> int:
    from sqlalchemy import func, select

    from vikingbot.store.tables import outbox

    with store.engine.connect() as conn:
        return int(
            conn.execute(select(func.count()).where(outbox.c.status == "pending")).scalar_one()
        )


def _count(
    store: Any,
    run: FleetRun,
    names: dict[str, int],
    telegram: FakeTelegram,
    procs: list[GatewayProcess],
) -> None:
    from sqlalchemy import func, select

    from vikingbot.store.tables import heartbeat_runs, leases, outbox

    with store.engine.connect() as conn:
        rows = conn.execute(
            select(heartbeat_runs.c.workspace).where(heartbeat_runs.c.decision == "run")
        ).all()
        sends = conn.execute(select(outbox.c.text, outbox.c.details)).all()
        owners = conn.execute(
            select(leases.c.owner).where(
                leases.c.key.startswith("hb:"), leases.c.done_at.is_not(None)
            )
        ).all()
        first, last = conn.execute(
            select(func.min(leases.c.acquired_at), func.max(leases.c.done_at)).where(
                leases.c.key.startswith("hb:"), leases.c.done_at.is_not(None)
            )
        ).one()
    if first is not None and last is not None:
        run.work_s = (last - first).total_seconds()
    run.ledger = Counter(names[r.workspace] for r in rows if r.workspace in names)
    run.delivered = Counter(
        int(m.group(1)) for s in telegram.sent if (m := UNIT.search(s["text"])) is not None
    )
    run.pending_outbox = _pending(store)
    for text, details in sends:
        found = UNIT.search(text or "")
        taken = int((details or {}).get("taken_in_flight", 0))
        if found is not None and taken:
            run.in_flight[int(found.group(1))] += taken
    run.resent_metric = sum(_resent_metric(gw) for gw in procs)
    per_pid = Counter(o.owner.rsplit(":", 1)[-1] for o in owners)
    run.by_gateway = tuple(
        per_pid.get(str(gw.proc.pid), 0) if gw.proc is not None else 0 for gw in procs
    )


def _resent_metric(gw: GatewayProcess) -> int:
    """``vikingbot_outbox_resent_after_crash_total`` of a gateway still running, else 0."""
    if gw.proc is None or gw.proc.poll() is not None:
        return 0
    try:
        text = str(gw.get("/metrics"))
    except OSError:
        return 0
    found = re.search(r"^vikingbot_outbox_resent_after_crash_total (\S+)$", text, re.M)
    return int(float(found.group(1))) if found else 0
