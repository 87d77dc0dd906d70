"""Gateway start: wall and CPU seconds from `vikingbot gateway` to ready, and what it imports.

Ready means what a test or a client waits for: ``/health`` answers and
``run/gateway.json`` is published (``tests.support.gateway_proc``). Each
start is a new child process in a new home (config written, folders, workspace
template and database migrations made at start, as in the tests' homes).

Homes:

- ``terminal``: the terminal-only user (``cli`` channel, the ``command``
  provider, no chat platform): nothing of openai, anthropic, telegram, slack,
  aiohttp, psycopg, playwright or acp should be imported;
- ``chat``: the e2e tests' home (``tests.support.home.Home``): the openai
  provider and Telegram, against the loopback fakes running in this process.

Byte-code: ``cached`` is an installed package's state (a warm cache under a
temporary ``PYTHONPYCACHEPREFIX``); ``compiled`` compiles every module on every
start (``PYTHONDONTWRITEBYTECODE=1`` with an empty cache folder), the state
the test suite's child processes were in before ``tests/conftest.py`` gave them
a cache. ``python -c pass`` (the interpreter's start) runs in the same rounds.

The variants alternate within each round, so a load change on a shared
machine hits all of them alike. Printed per variant: median and min wall
seconds, median CPU seconds of the child at ready (utime + stime, which a busy
machine inflates less than wall time), and the median paired difference
against ``cached``. Then, per home, the SDKs the gateway imported by the time
it was ready and its heaviest imports (``python -X importtime``, which sees
``import`` statements; ``tests/gateway/test_gateway_imports.py`` reads the
process's ``sys.modules`` instead).

    uv run --all-extras --dev python bench/gateway_start.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home
from vikingbot.testing.fake_openai import FakeOpenAI

# Top-level packages a gateway imports only when its config uses them.
SDKS = ("openai", "anthropic", "telegram", "slack_sdk", "aiohttp", "psycopg", "playwright", "acp")

TERMINAL_CONFIG = {
    "bot": {
        "agents": {"provider": "command", "model": "local"},
        "providers": {"command": {"command": [sys.executable, "-c", "print('ok')"]}},
        "channels": {"cli": {"enabled": True}},
        "heartbeat": {"timezone": "UTC"},
    }
}


def cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (all its threads) from /proc/<pid>/stat."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bytecode_env(mode: str, root: Path) -> dict[str, str]:
    """``cached``: one warm cache folder; ``compiled``: a new empty one, nothing written.

    An empty value unsets a ``PYTHON*`` variable (Python ignores empty ones), so
    the dict can go over ``os.environ`` as it is (``GatewayProcess(env=)``)."""
    env = {"PYTHONPROFILEIMPORTTIME": ""}
    if mode == "cached":
        env["PYTHONDONTWRITEBYTECODE"] = ""
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    else:
        empty = Path(tempfile.mkdtemp(prefix="nocache-", dir=root))
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = str(empty)
    return env


def clean(env: dict[str, str]) -> dict[str, str]:
    """os.environ with ``env`` over it, empty values dropped (for ``python -c pass``)."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    for key, value in env.items():
        if value:
            out[key] = value
        else:
            out.pop(key, None)
    return out


class Homes:
    """Fresh homes of each kind, the fakes shared by all the chat homes."""

    def __init__(self, root: Path, llm: FakeOpenAI, telegram: FakeTelegram, api: str) -> None:
        self.root, self.llm, self.telegram, self.api = root, llm, telegram, api
        self.made = 0

    def new(self, kind: str) -> Path:
        self.made += 1
        path = self.root / f"{kind}-{self.made}"
        if kind == "chat":
            Home(path, self.llm, self.telegram, self.api).write_config()
        else:
            path.mkdir()
            (path / "config.json").write_text(json.dumps(TERMINAL_CONFIG))
        return path


def start_gateway(home: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s at ready, the gateway's output) of one start, stopped after."""
    gw = GatewayProcess(home, env=env, start_timeout_s=180)
    t0 = time.perf_counter()
    gw.start()
    wall = time.perf_counter() - t0
    assert gw.proc is not None
    cpu = cpu_seconds(gw.proc.pid)
    gw.stop()
    return wall, cpu, gw.output


def python_pass(env: dict[str, str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", "pass"], env=clean(env))
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def imported(output: str) -> dict[str, int]:
    """module -> cumulative import microseconds, from ``-X importtime`` lines."""
    found: dict[str, int] = {}
    for line in output.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cum, name = line.removeprefix("import time:").split("|", 2)
        found[name.strip()] = int(cum)
    return found


@contextmanager
def fakes() -> Iterator[tuple[FakeOpenAI, FakeTelegram, str]]:
    with ExitStack() as stack:
        llm = stack.enter_context(FakeOpenAI.start())
        telegram = FakeTelegram()
        api = stack.enter_context(telegram.serve())
        yield llm, telegram, api


def run(rounds: int) -> None:
    variants = [(home, mode) for home in ("terminal", "chat") for mode in ("cached", "compiled")]
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="vikingbot-start-") as tmp, fakes() as fk:
        root = Path(tmp)
        homes = Homes(root, *fk)
        for kind in ("terminal", "chat"):  # warm the cache (not measured)
            start_gateway(homes.new(kind), bytecode_env("cached", root))
        measures: list[tuple[str, Callable[[], tuple[float, float]]]] = [
            ("python -c pass", lambda: python_pass(bytecode_env("cached", root)))
        ]
        for kind, mode in variants:

            def one(kind: str = kind, mode: str = mode) -> tuple[float, float]:
                wall, cpu, _ = start_gateway(homes.new(kind), bytecode_env(mode, root))
                return wall, cpu

            measures.append((f"{kind} gateway, {mode}", one))
        for r in range(rounds):
            order = measures if r % 2 == 0 else measures[::-1]
            for name, measure in order:
                wall, cpu = measure()
                walls.setdefault(name, []).append(wall)
                cpus.setdefault(name, []).append(cpu)
            for path in root.glob("nocache-*"):
                shutil.rmtree(path, ignore_errors=True)

        print(
            f"{'variant':<30} {'wall med':>9} {'wall min':>9} {'CPU med':>8} {'CPU - cached':>13}"
        )
        for name, _ in measures:
            base = name.replace("compiled", "cached")
            paired = (
                statistics.median(a - b for a, b in zip(cpus[name], cpus[base], strict=True))
                if base != name
                else None
            )
            print(
                f"{name:<30} {statistics.median(walls[name]):>8.2f}s {min(walls[name]):>8.2f}s "
                f"{statistics.median(cpus[name]):>7.2f}s "
                + (f"{paired:>+12.2f}s" if paired is not None else f"{'':>13}")
            )

        for kind in ("terminal", "chat"):
            env = {**bytecode_env("cached", root), "PYTHONPROFILEIMPORTTIME": "1"}
            _, _, output = start_gateway(homes.new(kind), env)
            mods = imported(output)
            sdks = [s for s in SDKS if s in mods]
            tops = sorted(
                ((n, c) for n, c in mods.items() if "." not in n and not n.startswith("_")),
                key=lambda item: -item[1],
            )[:8]
            print(f"\n{kind} home: {len(mods)} modules imported by ready; SDKs: {sdks or 'none'}")
            print(
                "  heaviest (cumulative, -X importtime): "
                + ", ".join(f"{n} {c / 1e6:.2f}s" for n, c in tops)
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="starts per variant")
    opts = parser.parse_args()
    print(
        f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1 and 5 min), "
        f"{os.cpu_count()} CPUs, {opts.rounds} rounds"
    )
    run(opts.rounds)


if __name__ == "__main__":
    main()
