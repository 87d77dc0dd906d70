"""What one heartbeat turn costs in model calls and input characters (issue 31).

The same scripted model drives every bot, over the OpenAI wire format on
loopback (``FakeOpenAI`` with ``tests.support.real_model.RealModel``): it calls
``read_file`` on HEARTBEAT.md while the task's text is not in what it was sent,
calls any offered tool the task names, then answers ``HEARTBEAT_OK``. Two tasks:
a no-op ("tell me only if something is overdue") and one that sends a message.

- vikingbot (this tree), ``bot.heartbeat.context`` full and light: each turn a real
  scheduled cycle of the heartbeat service (real loop, ``openai`` SDK);
- OpenViking's vikingbot 0.1.3 (with openviking 0.2.11 and a stub OpenViking
  server), through its own gateway wiring and ``HeartbeatService._tick``;
- nanobot (nanobot-ai 0.3.5), a real ``nanobot gateway`` whose heartbeat job fires
  every few seconds.

Each peer runs in a venv of its own (``~/.cache/vikingbot-bench/{ov,nb}``, made with
``--setup``); a missing venv is reported and skipped. Prints, per bot: model calls per
turn (no-op, message), input characters per turn, the 40th no-op turn against the 1st
(10th for the peers when ``--turns`` is lower), then the quiet day's model calls.

    uv run --all-extras --dev python bench/heartbeat_turn_cost.py [--turns 40] [--setup]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _heartbeat_setup import make_runtime, with_tasks, write_session  # noqa: E402
from loguru import logger  # noqa: E402

from tests.support.real_model import RealModel, chars  # noqa: E402
from vikingbot.clock import FakeClock  # noqa: E402
from vikingbot.gateway import compose  # noqa: E402
from vikingbot.session.types import SessionKey  # noqa: E402
from vikingbot.testing.fake_llm import RecordedRequest  # noqa: E402
from vikingbot.testing.fake_openai import FakeOpenAI  # noqa: E402

NOOP = "Look over my notes and tell me only if something is overdue."
MESSAGE = "Send me a `message` that says it is time to stretch."
PEERS = Path.home() / ".cache" / "vikingbot-bench"
PEER_PINS = {
    "ov": ["vikingbot==0.1.3", "openviking==0.2.11"],
    "nb": ["nanobot-ai==0.3.5"],
}
START = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)


@dataclass
class Turns:
    """The requests of each turn, as the fake received them."""

    per_turn: list[list[RecordedRequest]] = field(default_factory=list)

    def calls(self, i: int = 0) -> int:
        return len(self.per_turn[i])

    def chars(self, i: int = 0) -> int:
        return sum(chars(r) for r in self.per_turn[i])


# ------------------------------------------------------------------ vikingbot


async def ours(fake: FakeOpenAI, task: str, context: str, turns: int) -> Turns:
    clock = FakeClock(START)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        cfg: dict[str, Any] = {
            "bot": {
                "owner": "telegram:42",
                "agents": {"provider": "openai", "model": "fake-model"},
                "providers": {
                    "openai": {"api_base": fake.base_url, "api_key": "sk-test", "max_retries": 0}
                },
                "channels": {"telegram": {"enabled": True, "token": "t", "allow_from": ["42"]}},
                "heartbeat": {"timezone": "UTC", "context": context},
            }
        }
        rt = make_runtime(home, clock, cfg)
        try:
            rt.workspaces.ensure(
                rt.workspaces.workspace_for(SessionKey("telegram", "default", "42"))
            )
            ws = rt.paths.workspace_root / "shared"
            (ws / "HEARTBEAT.md").write_text(with_tasks(f"- {task}"))
            svc = compose.heartbeat(rt)
            out = Turns()
            for _ in range(turns):
                write_session(
                    rt.paths.sessions_dir,
                    SessionKey("telegram", "default", "42"),
                    clock.now() - timedelta(minutes=5),
                )
                before = len(fake.requests)
                await svc.run_cycle("scheduled")
                out.per_turn.append(list(fake.requests[before:]))
                clock.advance(seconds=600)
        finally:
            await rt.aclose()
    return out


# ------------------------------------------------------------------ peers


def peer_python(name: str) -> Path:
    return PEERS / name / "bin" / "python"


def setup_peers() -> None:
    """Make each peer's venv (uv, from PyPI); never our dependencies."""
    PEERS.mkdir(parents=True, exist_ok=True)
    for name, pins in PEER_PINS.items():
        if peer_python(name).exists():
            continue
        subprocess.run(["uv", "venv", "-q", str(PEERS / name), "--python", "3.11"], check=True)
        subprocess.run(
            ["uv", "pip", "install", "-q", "-p", str(peer_python(name)), *pins], check=True
        )


def _marker(proc: subprocess.Popen[str]) -> str | None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("@@ "):
            return line[3:].strip()
    return None


def openviking(fake: FakeOpenAI, task: str, turns: int, ov_url: str) -> Turns:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [
                str(peer_python("ov")),
                str(ROOT / "bench/peers/openviking_turns.py"),
                tmp,
                fake.base_url,
                ov_url,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdin is not None
        try:
            where = _marker(proc)
            if where is None or not where.startswith("workspace "):
                raise RuntimeError(f"OpenViking's vikingbot did not start ({where})")
            Path(where.split(" ", 1)[1], "HEARTBEAT.md").write_text(with_tasks(f"- {task}"))
            out = Turns()
            for _ in range(turns):
                before = len(fake.requests)
                proc.stdin.write("\n")
                proc.stdin.flush()
                if _marker(proc) is None:
                    raise RuntimeError("OpenViking's vikingbot stopped mid-run")
                out.per_turn.append(list(fake.requests[before:]))
        finally:
            proc.kill()
            proc.wait()
    return out


def _starts(requests: list[RecordedRequest]) -> list[int]:
    """Where nanobot's heartbeat turns begin: a request ending on a user message that is
    not its post-run evaluator's."""
    return [
        i
        for i, r in enumerate(requests)
        if r.messages
        and r.messages[-1].get("role") == "user"
        and "evaluate_notification" not in r.tool_names
    ]


def nanobot(fake: FakeOpenAI, task: str, turns: int, interval_s: int = 2) -> Turns:
    import time

    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [
                str(peer_python("nb")),
                str(ROOT / "bench/peers/nanobot_gateway.py"),
                tmp,
                fake.base_url,
                str(interval_s),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            where = _marker(proc)
            if where is None or not where.startswith("workspace "):
                raise RuntimeError(f"nanobot did not start ({where})")
            before = len(fake.requests)
            Path(where.split(" ", 1)[1], "HEARTBEAT.md").write_text(with_tasks(f"- {task}"))
            deadline = time.monotonic() + 60 + turns * (interval_s + 3)
            while time.monotonic() < deadline:
                if len(_starts(fake.requests[before:])) > turns:
                    break
                if proc.poll() is not None:
                    raise RuntimeError(f"nanobot's gateway exited ({proc.returncode})")
                time.sleep(0.2)
            else:
                raise RuntimeError("nanobot's heartbeat did not run often enough in time")
        finally:
            proc.kill()
            proc.wait()
        seen = fake.requests[before:]
        starts = _starts(seen)
        return Turns([seen[a:b] for a, b in itertools.pairwise(starts)][:turns])


def stub_openviking() -> Any:
    """A stub OpenViking server: every call answers ``{"status": "ok"}`` with an empty result."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from vikingbot.testing.server import serve_app

    async def anything(request: Any) -> JSONResponse:
        return JSONResponse({"status": "ok", "result": []})

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
    app = Starlette(routes=[Route("/{path:path}", anything, methods=methods)])
    return serve_app(app)


# ------------------------------------------------------------------ report


def line(name: str, noop: Turns | None, msg: Turns | None, why: str = "") -> str:
    if noop is None or msg is None:
        return f"{name:<26} not run: {why}"
    n = len(noop.per_turn)
    first, last = noop.chars(0), noop.chars(n - 1)
    growth = (last - first) / first * 100 if first else 0.0
    return (
        f"{name:<26} {noop.calls(0):>5} {msg.calls(0):>5} {noop.chars(0):>9,} {msg.chars(0):>9,}"
        f" {last:>9,} (turn {n}: {growth:+.1f}%)"
    )


def quiet_day() -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/quiet_day.py")], capture_output=True, text=True
    )
    found = [x for x in done.stdout.splitlines() if x.startswith("model calls on a quiet day")]
    return "\n".join(found) or done.stdout[-500:] + done.stderr[-500:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--peer-turns", type=int, default=10)
    ap.add_argument("--setup", action="store_true", help="make the peers' venvs first")
    ap.add_argument("--skip-quiet-day", action="store_true")
    args = ap.parse_args()
    logger.remove()
    if args.setup:
        setup_peers()
    rows: list[str] = []
    with FakeOpenAI.start() as fake:

        def measure(run: Callable[[str, int], Turns], turns: int) -> tuple[Turns, Turns]:
            fake.responder = RealModel(NOOP)
            noop = run(NOOP, turns)
            fake.responder = RealModel(MESSAGE)
            msg = run(MESSAGE, 1)
            return noop, msg

        for context in ("full", "light"):

            def run_ours(task: str, n: int, context: str = context) -> Turns:
                return asyncio.run(ours(fake, task, context, n))

            noop, msg = measure(run_ours, args.turns)
            rows.append(line(f"vikingbot, context {context}", noop, msg))
        if peer_python("ov").exists():
            with stub_openviking() as stub_url:
                try:
                    noop, msg = measure(
                        lambda t, n: openviking(fake, t, n, stub_url), args.peer_turns
                    )
                    rows.append(line("OpenViking vikingbot 0.1.3", noop, msg))
                except RuntimeError as exc:
                    rows.append(line("OpenViking vikingbot 0.1.3", None, None, str(exc)))
        else:
            rows.append(
                line(
                    "OpenViking vikingbot 0.1.3", None, None, f"no venv at {PEERS / 'ov'} (--setup)"
                )
            )
        if peer_python("nb").exists():
            try:
                noop, msg = measure(lambda t, n: nanobot(fake, t, n), args.peer_turns)
                rows.append(line("nanobot 0.3.5", noop, msg))
            except RuntimeError as exc:
                rows.append(line("nanobot 0.3.5", None, None, str(exc)))
        else:
            rows.append(line("nanobot 0.3.5", None, None, f"no venv at {PEERS / 'nb'} (--setup)"))
    print("model calls and input characters (messages + tool schemas, as JSON) per heartbeat turn")
    print(
        f"{'':<26} {'calls':>5} {'calls':>5} {'chars':>9} {'chars':>9} {'chars of the last no-op turn'}"
    )
    print(f"{'':<26} {'no-op':>5} {'msg':>5} {'no-op':>9} {'msg':>9}")
    for r in rows:
        print(r)
    print(
        "targets: 1 call for a no-op, 2 for a message; light <= 6,000 chars; last within 10% of the 1st"
    )
    if not args.skip_quiet_day:
        print("quiet day (bench/quiet_day.py):")
        print(quiet_day())


if __name__ == "__main__":
    main()
