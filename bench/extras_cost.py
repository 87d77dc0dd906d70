"""What the `mcp` and `notify` packages cost in the default install (issue 42).

For each variant (the install without them, with the MCP SDK, with Apprise, with both)
a fresh virtualenv gets this checkout installed (`uv pip install`, uv's cache warm:
the figure is unpacking and linking, not the network; `--uncached` uses an empty
cache, so downloads count): install seconds, site-packages MB and distributions.
Then the CPU seconds to import each SDK (best of 3 fresh interpreters; vikingbot
imports them only when a server is configured / a push is sent) beside
`import vikingbot.cli.app`, and whether the CLI and the gateway's modules import
them at all (they must not).

    uv run --all-extras --dev python bench/extras_cost.py [--uncached]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the two packages as pyproject.toml pins them (now in the default install)
VARIANTS = {
    "without mcp, apprise": [],
    "+ mcp": ["mcp>=2.3"],
    "+ apprise (notify)": ["apprise>=1.9"],
    "+ both (the default now)": ["mcp>=2.3", "apprise>=1.9"],
}


def site_mb(venv: Path) -> tuple[float, int]:
    (site,) = venv.glob("lib/python*/site-packages")
    total = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    return total / 1e6, len(list(site.glob("*.dist-info")))


def install(tmp: Path, name: str, extra: list[str], uncached: bool) -> str:
    venv = tmp / name.replace(" ", "_").replace("(", "").replace(")", "").replace(",", "")
    subprocess.run(["uv", "venv", "-q", str(venv)], check=True)
    # the checkout without the two (a copy of pyproject.toml with their lines dropped)
    src = tmp / "src"
    if not src.exists():
        shutil.copytree(REPO / "vikingbot", src / "vikingbot")
        text = (REPO / "pyproject.toml").read_text()
        kept = [
            ln for ln in text.splitlines() if ln.strip() not in ('"mcp>=2.3",', '"apprise>=1.9",')
        ]
        (src / "pyproject.toml").write_text("\n".join(kept) + "\n")
        for extra_file in ("README.md", "LICENSE"):
            if (REPO / extra_file).exists():
                shutil.copy(REPO / extra_file, src / extra_file)
        if (REPO / "workspace_template").exists():
            shutil.copytree(REPO / "workspace_template", src / "workspace_template")
    env = dict(os.environ)
    if uncached:
        env["UV_CACHE_DIR"] = str(tmp / f"cache-{venv.name}")
    t0 = time.monotonic()
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(src), *extra],
        check=True,
        env=env,
    )
    took = time.monotonic() - t0
    mb, dists = site_mb(venv)
    return f"{name:<28} install {took:5.1f} s  site-packages {mb:6.1f} MB  {dists:3d} distributions"


def import_cpu(stmt: str) -> float:
    best = float("inf")
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", stmt], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, cpu)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uncached", action="store_true", help="empty uv cache: downloads count")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in VARIANTS.items():
            print(install(Path(tmp), name, extra, args.uncached), flush=True)
    base = import_cpu("pass")
    for label, stmt in (
        ("import vikingbot.cli.app", "import vikingbot.cli.app"),
        (
            "import mcp (ClientSession, stdio_client)",
            "from mcp import ClientSession; from mcp.client.stdio import stdio_client",
        ),
        ("import apprise", "import apprise"),
    ):
        print(
            f"{label:<44} CPU {import_cpu(stmt) - base:5.2f} s (best of 3, python -c pass subtracted)"
        )
    probe = (
        "import sys, vikingbot.cli.app, vikingbot.gateway.supervisor, vikingbot.mcp.hub, "
        "vikingbot.channels.notify; print(sorted(m for m in ('mcp', 'apprise') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    print(f"imported by the CLI and the gateway's modules: {loaded.stdout.strip()} (target [])")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
