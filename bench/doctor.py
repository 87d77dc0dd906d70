"""`vikingbot doctor` wall time on a fresh home, without and with `--live`.

Each run is a fresh ``python -m vikingbot`` process with ``VIKINGBOT_HOME`` set to
a new, empty folder holding only a config that names the provider (openai,
model ``gpt-bench``) with its key and the fake OpenAI server's base URL: the
first thing a new user runs. ``--live`` makes one real call through the
built-in agent loop and the ``openai`` SDK to that server (answering at once).
Beside them, in the same run: ``vikingbot --version`` (the CLI's start alone)
and ``vikingbot status`` on the same kind of home. Last, ``doctor --live`` with a
gateway running for one such home: the call goes through the gateway (its agent
is warm; the CLI imports no model SDK). Median and minimum of
``--runs`` (default 5) runs each; byte-code cached and warmed by one unmeasured
run, as an installed package has it.

    uv run --dev python bench/doctor.py [--runs 5]

Target: ``doctor`` (no ``--live``) median under 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vikingbot.testing.fake_openai import FakeOpenAI, reply

TARGET_S = 1.0


def fresh_home(root: Path, n: int, base_url: str) -> Path:
    home = root / f"home{n}"
    home.mkdir()
    bot = {
        "agents": {"provider": "openai", "model": "gpt-bench"},
        "providers": {"openai": {"apiKey": "sk-bench", "apiBase": base_url}},
    }
    config = home / "config.json"
    config.write_text(json.dumps({"bot": bot}), encoding="utf-8")
    config.chmod(0o600)
    return home


def run_once(args: list[str], home: Path, pycache: Path, expect: str = "✓ agent") -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    env.update(VIKINGBOT_HOME=str(home), PYTHONPYCACHEPREFIX=str(pycache))
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "vikingbot", *args],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - started
    if args[:1] == ["doctor"] and expect not in proc.stdout:
        raise SystemExit(f"{' '.join(args)} did not pass the agent check:\n{proc.stdout}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI.start() as fake:
        fake.script([reply("OK")] * (opts.runs + 1) * 4)
        root, pycache = Path(tmp), Path(tmp) / "pycache"
        n = 0
        cases = [["--version"], ["status"], ["doctor"], ["doctor", "--live"]]
        for args in cases:  # warm the byte-code cache
            n += 1
            run_once(args, fresh_home(root, n, fake.base_url), pycache)
        print(
            f"doctor bench: {opts.runs} runs each, fresh home per run, load {os.getloadavg()[0]:.2f}"
        )
        for args in cases:
            times = []
            for _ in range(opts.runs):
                n += 1
                times.append(run_once(args, fresh_home(root, n, fake.base_url), pycache))
            name = "vikingbot " + " ".join(args)
            target = f"  (target < {TARGET_S:.0f} s)" if args == ["doctor"] else ""
            print(
                f"{name:<26} median {statistics.median(times):.3f} s"
                f"  min {min(times):.3f} s{target}"
            )
        n += 1
        live = through_gateway(fresh_home(root, n, fake.base_url), pycache, opts.runs)
        print(
            f"{'doctor --live, gateway':<26} median {statistics.median(live):.3f} s"
            f"  min {min(live):.3f} s  (the call through the running gateway)"
        )


def through_gateway(home: Path, pycache: Path, runs: int) -> list[float]:
    """``doctor --live`` ``runs`` times while a gateway runs for ``home``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
    from tests.support.gateway_proc import GatewayProcess

    env = {"PYTHONPYCACHEPREFIX": str(pycache)}
    with GatewayProcess(home, env=env, fork=False):
        via = "live call through the running gateway"
        run_once(["doctor", "--live"], home, pycache, via)  # the gateway's first turn
        return [run_once(["doctor", "--live"], home, pycache, via) for _ in range(runs)]


if __name__ == "__main__":
    main()
