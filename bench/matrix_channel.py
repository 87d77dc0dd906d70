"""The Matrix channel against a real Synapse, in a real `vikingbot gateway` process.

Prints the figures of issue 36 for Matrix:

- files the channel changed outside its own module and entry point (target 0, plus
  docs), counted with git over the commits that touched vikingbot/channels/matrix.py,
  beside the example plug-in's count (examples/vikingbot-channel-example);
- 200 inbound messages in 10 rooms (DMs of 10 people, 20 each, sent as fast as the
  homeserver takes them): answered, duplicates, rooms whose answers kept the order;
- time from a heartbeat result (the model's `message` call, per-task mode, N tasks) to
  its event in the room (the homeserver's timestamp), median, beside a bare client's
  send to the same homeserver (the floor);
- outbox resend after SIGKILL mid-send: the gateway's homeserver connection goes
  through a loopback proxy that lets a send reach Synapse and holds the answer; the
  gateway is killed then, started again, and re-sends the row: duplicates seen in
  the room (target 0).

Needs Synapse where tests/support/synapse.py looks (.ci/run installs it).

    uv run --all-extras --dev python bench/matrix_channel.py [--messages 200] [--rooms 10] [--results 10]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.cutting_proxy import CuttingProxy
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll, with_tasks
from tests.support.synapse import Synapse, User, start
from vikingbot.testing.fake_llm import RecordedRequest, Step, reply, tool_call
from vikingbot.testing.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
MSG = re.compile(r"\bm(\d+)-(\d+)\b")
TASK = re.compile(r"Bench task (\d+)")


def files_outside() -> tuple[list[str], dict[str, list[str]]]:
    """Files changed by this issue's commits that touched the Matrix module, by kind."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout

    # this issue's commits (others' refactors of every channel touched the module too)
    commits = git(
        "log",
        "--format=%H",
        "-E",
        "--grep=^(channels: Matrix|matrix:)",
        "--",
        "vikingbot/channels/matrix.py",
    ).split()
    files = sorted({f for c in commits for f in git("show", "--name-only", "--format=", c).split()})
    kinds: dict[str, list[str]] = {
        "module": [],
        "entry point": [],
        "docs": [],
        "tests/bench/CI": [],
        "outside": [],
    }
    for f in files:
        if f == "vikingbot/channels/matrix.py":
            kinds["module"].append(f)
        elif f in ("pyproject.toml", "uv.lock"):
            kinds["entry point"].append(f)
        elif f.startswith("docs/") or f == "README.md":
            kinds["docs"].append(f)
        elif f.startswith(("tests/", "bench/", ".ci/")):
            kinds["tests/bench/CI"].append(f)
        else:
            kinds["outside"].append(f)
    example = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "examples" / "vikingbot-channel-example").rglob("*")
        if p.is_file() and p.suffix in (".py", ".toml")
    )
    return example, kinds


class Model:
    """The fake model: echoes chat messages, a heartbeat task's turn calls `message`."""

    def __init__(self) -> None:
        self.stamped: dict[str, float] = {}  # result text -> when the model answered
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Step:
        if request.messages and request.messages[-1].get("role") == "tool":
            return reply("HEARTBEAT_OK")
        text = request.last_user_text
        task = TASK.search(text)
        if task is not None and "HEARTBEAT" in text:
            result = f"hb result {task.group(1)} {uuid.uuid4().hex[:6]}"
            with self.lock:
                self.stamped[result] = time.time()
            return tool_call("message", {"text": result})
        found = MSG.search(text)
        return reply(f"re: {found.group(0)}" if found else "HEARTBEAT_OK")


@contextmanager
def proxy_thread(port: int) -> Iterator[tuple[CuttingProxy, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    proxy = CuttingProxy(port)
    asyncio.run_coroutine_threadsafe(proxy.__aenter__(), loop).result()
    try:
        yield proxy, loop
    finally:
        asyncio.run_coroutine_threadsafe(proxy.__aexit__(None, None, None), loop).result()
        loop.call_soon_threadsafe(loop.stop)


def make_home(
    tmp: Path,
    name: str,
    llm: FakeOpenAI,
    hs_url: str,
    bot: User,
    owner_room: str,
    allow: list[str],
    interval_s: int = 3600,
) -> Home:
    tg = FakeTelegram()
    home = Home(tmp / name, llm, tg, "http://127.0.0.1:9")
    home.write_config(
        owner=f"matrix:{owner_room}",
        heartbeat={"timezone": "UTC", "mode": "per-task", "interval_seconds": interval_s},
        channels={
            "telegram": {"enabled": False},
            "matrix": {
                "enabled": True,
                "homeserver": hs_url,
                "access_token": bot.token,
                "allow_from": allow,
            },
        },
    )
    return home


def dm(hs: Synapse, person: User, bot: User) -> str:
    room = hs.create_room(person, invite=[bot.user_id], direct=True)
    hs.join(bot, room)
    return room


def inbound(hs: Synapse, tmp: Path, llm: FakeOpenAI, admin: User, n: int, rooms: int) -> None:
    bot = hs.register()
    hs.unlimited(admin, bot)
    people = [hs.register() for _ in range(rooms)]
    for p in people:
        hs.unlimited(admin, p)
    dms = [dm(hs, p, bot) for p in people]
    home = make_home(tmp, "inbound", llm, hs.url, bot, dms[0], [p.user_id for p in people])
    gw = GatewayProcess(home.path, start_timeout_s=120).start()
    try:
        poll(lambda: gw.get("/health").get("status") == "ok", "a healthy gateway")
        per_room = n // rooms
        began = time.monotonic()
        for i in range(per_room):
            for r, (p, room) in enumerate(zip(people, dms, strict=True)):
                hs.say(p, room, f"question m{r}-{i}")
        total = per_room * rooms

        def answers() -> list[list[str]]:
            return [
                hs.texts(p, room, sender=bot.user_id) for p, room in zip(people, dms, strict=True)
            ]

        def all_in() -> list[list[str]] | None:
            got = answers()
            return got if sum(len(a) for a in got) >= total else None

        try:
            got = poll(all_in, "every answer", timeout=300)
        except AssertionError:
            got = answers()
        took = time.monotonic() - began
    finally:
        gw.stop()
    flat = [a for room in got for a in room]
    dupes = sum(c - 1 for c in Counter(flat).values() if c > 1)
    ordered = sum(
        1
        for r, room in enumerate(got)
        if [a for a in room if a.startswith("re: ")] == [f"re: m{r}-{i}" for i in range(per_room)]
    )
    print(
        f"inbound: {total} messages in {rooms} rooms: {len(set(flat))} answered, {dupes} duplicates, "
        f"order kept in {ordered}/{rooms} rooms, {took:.1f} s"
    )


def heartbeat_latency(
    hs: Synapse, tmp: Path, llm: FakeOpenAI, model: Model, admin: User, results: int
) -> None:
    bot, owner = hs.register(), hs.register()
    hs.unlimited(admin, bot)
    hs.unlimited(admin, owner)
    room = dm(hs, owner, bot)
    home = make_home(tmp, "latency", llm, hs.url, bot, room, [owner.user_id])
    home.add_user_session()
    home.write_heartbeat(with_tasks(*(f"- Bench task {i}" for i in range(results))))
    gw = GatewayProcess(home.path, start_timeout_s=120).start()
    try:
        events = poll(
            lambda: (lambda e: e if len(e) >= results else None)(
                [e for e in hs.messages(owner, room) if e["sender"] == bot.user_id]
            ),
            "every heartbeat result",
            timeout=180,
        )
    finally:
        gw.stop()
    lags = [
        e["origin_server_ts"] / 1000 - model.stamped[e["content"]["body"]]
        for e in events
        if e["content"]["body"] in model.stamped
    ]
    # the floor: a bare client's send and its event time, the same homeserver and room
    floor = []
    for i in range(results):
        sent = time.time()
        hs.say(owner, room, f"floor {i}")
        floor.append(hs.messages(owner, room)[-1]["origin_server_ts"] / 1000 - sent)
    print(
        f"heartbeat result -> room: median {statistics.median(lags) * 1000:.0f} ms over "
        f"{len(lags)} results (bare client send -> event: median {statistics.median(floor) * 1000:.0f} ms)"
    )


def sigkill(hs: Synapse, tmp: Path, llm: FakeOpenAI, admin: User, kills: int) -> None:
    bot, owner = hs.register(), hs.register()
    hs.unlimited(admin, bot)
    room = dm(hs, owner, bot)
    seen_copies: list[int] = []  # per row taken over in flight: its copies in the room
    resent = 0
    with proxy_thread(hs.port) as (proxy, loop):
        # a short interval: each restarted gateway soon runs a cycle whose send is held
        home = make_home(tmp, "sigkill", llm, proxy.url, bot, room, [owner.user_id], 10)
        home.add_user_session()
        for k in range(kills):
            home.write_heartbeat(with_tasks(f"- Bench task {100 + k}"))
            loop.call_soon_threadsafe(lambda: proxy.lose_next(b"/send/m.room.message/", hold=True))
            gw = GatewayProcess(home.path, start_timeout_s=120).start()
            poll(lambda: proxy.lost.is_set(), "a send held on the wire", timeout=120)
            gw.kill()  # SIGKILL while the send's answer is on its way
            gw = GatewayProcess(home.path, start_timeout_s=120).start()
            try:
                poll(lambda: all(r.status == "sent" for r in home.outbox()) or None, "the resend")
            finally:
                gw.stop()
        texts = hs.texts(owner, room, sender=bot.user_id)
        held = [r.text for r in home.outbox() if r.taken_in_flight]
        seen_copies = [texts.count(t) for t in held]
        resent = len(held)
    dupes = sum(c - 1 for c in seen_copies if c > 1)
    print(
        f"outbox resend after SIGKILL mid-send: {kills} kills, {resent} rows taken over in flight "
        f"and sent again, copies of each in the room {seen_copies}, duplicates {dupes}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--rooms", type=int, default=10)
    ap.add_argument("--results", type=int, default=10)
    ap.add_argument("--kills", type=int, default=3)
    args = ap.parse_args()

    example, kinds = files_outside()
    print(f"files: the example plug-in (baseline) {len(example)}: {', '.join(example)}")
    for kind, names in kinds.items():
        print(f"files: Matrix {kind}: {len(names)}" + (f" ({', '.join(names)})" if names else ""))

    model = Model()
    with tempfile.TemporaryDirectory() as tmp_s, FakeOpenAI.start() as llm:
        tmp = Path(tmp_s)
        llm.responder = model
        hs = start(tmp / "synapse")
        try:
            admin = hs.register(admin=True)
            inbound(hs, tmp, llm, admin, args.messages, args.rooms)
            heartbeat_latency(hs, tmp, llm, model, admin, args.results)
            sigkill(hs, tmp, llm, admin, args.kills)
        finally:
            hs.stop()


if __name__ == "__main__":
    main()
