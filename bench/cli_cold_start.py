"""CLI cold start: wall time of `vikingbot --help` and `vikingbot status` in fresh processes.

Each command runs ``--runs`` times (default 10) as ``python -m vikingbot ...``
with ``VIKINGBOT_HOME`` set to a temporary folder whose config was created
beforehand, so the runs measure the steady state a user sees, not first start.
Byte-code is cached under a temporary ``PYTHONPYCACHEPREFIX`` and warmed by one
unmeasured run, as an installed package would have it (``--no-bytecode-cache``
measures with compilation on every start instead). The figures are the median
and the minimum wall time, plus the median CPU time (user + system) of the
child, which a busy machine inflates much less than wall time.

For ``--help`` it then prints the ten modules with the largest cumulative
import time (``python -X importtime``, best of three runs per module), so a
heavy import that slipped into the CLI's start path is easy to spot.

Then ``vikingbot status`` with a gateway running for the home (it asks the gateway's
``/health`` for the agent's readiness and the gateways sharing the database),
then as many runs of ``status`` after the gateway stopped (the baseline, same run).

Then the first start: ``vikingbot status`` on a fresh home (a new empty folder
each run: no config, no database), alternating run by run with ``status`` on the
existing home (the baseline, same run), with the paired CPU ratio. It checks
that the fresh status created no database. ``--baseline-src DIR`` adds the same
fresh-home status run from another checkout's ``vikingbot`` package (e.g. one
unpacked with ``git archive`` from an older commit), in the same alternation, for a
before/after figure.

    uv run --dev python bench/cli_cold_start.py [--runs 10] [--no-bytecode-cache] [--baseline-src DIR]

Target: median under 300 ms for each command.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MS = 300.0
COMMANDS = (["--help"], ["status"])


def child_env(home: Path, pycache: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    env["VIKINGBOT_HOME"] = str(home)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    if pycache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def fresh_status(
    env: dict[str, str], root: Path, n: int, src: Path | None = None
) -> tuple[float, float]:
    """(wall ms, CPU ms) of ``status`` on a home that does not exist yet (``src``: with
    that checkout's package); this checkout's leaves no database behind (checked)."""
    home = root / f"fresh-{n}"
    env = {**env, "VIKINGBOT_HOME": str(home)}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    result = run_once(["status"], env, root)
    if src is None:  # this checkout's status creates none (an older one may)
        assert not list(home.rglob("state.db*")), f"status created a database in {home}"
    return result


def run_once(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall ms, CPU ms) of one fresh ``python -m vikingbot <args>``; fails loudly on error."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "vikingbot", *args],
            env=env,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall_ms = (time.perf_counter() - started) * 1000
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            errors.seek(0)
            text = errors.read().decode(errors="replace")
            raise SystemExit(f"vikingbot {' '.join(args)} exited {code}:\n{text}")
    return wall_ms, (usage.ru_utime + usage.ru_stime) * 1000


def import_times(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, tuple[int, int]]:
    """module -> (self us, cumulative us) from one ``python -X importtime`` run."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vikingbot", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    out: dict[str, tuple[int, int]] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = line.removeprefix("import time:").split("|", 2)
        out[name.strip()] = (int(self_us), int(cum_us))
    return out


def top_imports(
    args: list[str], env: dict[str, str], cwd: Path, *, repeats: int = 3, top: int = 10
) -> list[tuple[str, int, int]]:
    best: dict[str, tuple[int, int]] = {}
    for _ in range(repeats):
        for name, (self_us, cum_us) in import_times(args, env, cwd).items():
            old = best.get(name)
            best[name] = (self_us, cum_us) if old is None or cum_us < old[1] else old
    ranked = sorted(best.items(), key=lambda item: item[1][1], reverse=True)
    return [(name, s, c) for name, (s, c) in ranked[:top]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per command")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="compile every module on every start (as with PYTHONDONTWRITEBYTECODE=1)",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="a folder holding another checkout's vikingbot package: its fresh-home status "
        "runs in the same alternation",
    )
    opts = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="vikingbot-cold-") as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        pycache = None if opts.no_bytecode_cache else root / "pycache"
        env = child_env(home, pycache)
        # creates the config and data folders, and warms the byte-code cache
        for args in COMMANDS:
            run_once(args, env, root)
        assert (home / "config.json").is_file(), "status did not create the config"

        cache = "off (compiled every start)" if pycache is None else "warm"
        print(f"python {sys.version.split()[0]}, byte-code cache {cache}, {opts.runs} runs each")
        misses = []
        for args in COMMANDS:
            samples = [run_once(args, env, root) for _ in range(opts.runs)]
            walls = [w for w, _ in samples]
            cpus = [c for _, c in samples]
            median = statistics.median(walls)
            name = "vikingbot " + " ".join(args)
            print(
                f"{name:<18} median {median:6.0f} ms  min {min(walls):6.0f} ms  "
                f"(CPU median {statistics.median(cpus):5.0f} ms)  target < {TARGET_MS:.0f} ms"
            )
            if median >= TARGET_MS:
                misses.append(name)

        print("\nvikingbot --help: top 10 modules by cumulative import time (best of 3)")
        print(f"{'cumulative':>12} {'self':>9}  module")
        for module, self_us, cum_us in top_imports(["--help"], env, root):
            print(f"{cum_us / 1000:9.1f} ms {self_us / 1000:6.1f} ms  {module}")
        with_gateway(env, root, home, opts.runs)
        first_start(env, root, opts.runs, opts.baseline_src)
        if misses:
            print(f"\nover target: {', '.join(misses)}")


def with_gateway(env: dict[str, str], root: Path, home: Path, runs: int) -> None:
    """``status`` while a gateway runs for ``home``, paired with ``status`` without one."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
    from tests.support.gateway_proc import GatewayProcess

    gw = GatewayProcess(home, env=env, fork=False).start()
    try:
        run_once(["status"], env, root)  # the first answer after start
        running = [run_once(["status"], env, root) for _ in range(runs)]
    finally:
        gw.stop()
    stopped = [run_once(["status"], env, root) for _ in range(runs)]
    print(f"\nstatus with a gateway running for the home, {runs} runs each")
    for name, samples in (("gateway running", running), ("no gateway (baseline)", stopped)):
        walls, cpus = [w for w, _ in samples], [c for _, c in samples]
        print(
            f"status, {name:<24} wall median {statistics.median(walls):6.0f} ms  "
            f"min {min(walls):6.0f} ms  (CPU median {statistics.median(cpus):5.0f} ms)"
        )


def first_start(env: dict[str, str], root: Path, runs: int, src: Path | None) -> None:
    """Fresh-home status against existing-home status (and ``src``'s), run by run."""
    fresh_status(env, root, -1)  # byte-code for the first-start path
    if src is not None:
        fresh_status(env, root, -2, src)
    fresh, existing, before = [], [], []
    for n in range(runs):
        fresh.append(fresh_status(env, root, n))
        existing.append(run_once(["status"], env, root))
        if src is not None:
            before.append(fresh_status(env, root, runs + n, src))

    def line(name: str, samples: list[tuple[float, float]]) -> None:
        walls, cpus = [w for w, _ in samples], [c for _, c in samples]
        print(
            f"{name:<34} CPU median {statistics.median(cpus):5.0f} ms  "
            f"wall median {statistics.median(walls):6.0f} ms  min {min(walls):6.0f} ms"
        )

    def ratio(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
        return statistics.median(x[1] / y[1] for x, y in zip(a, b, strict=True))

    print(f"\nfirst start: status on a fresh home (no config, no database), {runs} pairs")
    line("status, fresh home", fresh)
    line("status, existing home (baseline)", existing)
    print(f"{'fresh / existing, paired CPU':<34} {ratio(fresh, existing):.2f}x")
    if src is not None:
        line(f"status, fresh home ({src.name})", before)
        print(f"{'fresh / ' + src.name + ', paired CPU':<34} {ratio(fresh, before):.2f}x")
    print(f"no database created by a fresh-home status; target < {TARGET_MS:.0f} ms")


if __name__ == "__main__":
    main()
