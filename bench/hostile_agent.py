"""A hostile agent against a real gateway (issue 38): what it can widen, and whom it can wedge.

    uv run --all-extras --dev python bench/hostile_agent.py [--calm 5] [--flood 5000]

1. Hostile-agent matrix: a real ``vikingbot gateway`` whose ACP agent is the
   scripted stdlib agent (``tests/support/hostile_acp.py``). A forced heartbeat
   run where the agent asks leave with mislabelled kinds and titles (the
   issue's ``{"title": "read_file", "kind": "delete"}`` and friends): requests
   approved that the policy does not allow (target 0). Then, per mode (FIFO
   reads, devices and sockets, a flood of updates, garbage on stdout, a hang
   past the turn timeout), a calm chat sent while the hostile turn runs: its
   seconds, beside the same calm chat alone (median of ``--calm``) in the same
   run; the difference is what it waited beyond its own model time (target
   under 2 s).
2. Environment variables visible to an unattended ``exec`` in the bubblewrap
   sandbox (``env`` printed inside), with API keys in the gateway's
   environment, beside the number of variables the gateway itself has
   (what the sandbox inherited before issue 38). Target: only those listed
   (PATH, HOME, TMPDIR, LANG/LC_*/TZ when set, ``bot.tools.exec.env``; the
   shell's own PWD).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.hostile_acp import (  # noqa: E402
    CALM,
    CALM_SESSION,
    MISLABELLED,
    HostileGateway,
)

MODES = ("fifo", "device", "flood", "garbage", "hang")
LISTED = {"PATH", "HOME", "TMPDIR", "LANG", "TZ", "PWD", "SHLVL", "_", "GIT_AUTHOR_NAME"}


def matrix(calm_runs: int, flood: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rig = HostileGateway(Path(tmp), flood=flood).start()
        try:
            run = rig.heartbeat_now()
            wrong = rig.wrongly_approved()
            asked = sum(1 for e in rig.audit() if e["action"].startswith("tool."))
            print("1. hostile-agent matrix (real gateway, ACP loop, scripted stdlib agent)")
            print(f"   heartbeat run: HTTP {run.status}; permission requests {asked} "
                  f"({len(MISLABELLED)} scripted, {sum(not p.allowed for p in MISLABELLED)} "
                  "mislabelled to look safe)")  # fmt: skip
            print(f"   approved although the policy does not allow them: {wrong}  (target 0)")
            alone = statistics.median(
                rig.chat(CALM, CALM_SESSION).seconds for _ in range(calm_runs)
            )
            print(f"   calm chat alone (baseline, median of {calm_runs}): {alone:.3f} s")
            print(f"   {'mode':<8} {'hostile turn':<40} {'calm chat':>10} {'waited beyond':>14}")
            for mode in MODES:
                bad, calm = rig.calm_beside(mode)
                what = (
                    (bad.body.get("ended") or "?")
                    + ": "
                    + str(bad.body.get("error") or bad.body.get("reply") or "").replace("\n", " ")
                )
                extra = calm.seconds - alone
                print(f"   {mode:<8} {what[:40]:<40} {calm.seconds:>9.3f}s {extra:>13.3f}s")
            problems = rig.gw.get("/health")["problems"] if rig.gw else []
            print(f"   /health problems after the matrix: {problems or 'none'}")
            print(f"   modes tried: {1 + len(MODES)} (mislabel, {', '.join(MODES)}); "
                  "target: each calm chat under 2 s beyond its baseline")  # fmt: skip
        finally:
            rig.stop()


async def sandbox_env() -> None:
    from vikingbot.config.schema import Config
    from vikingbot.session.types import SessionKey
    from vikingbot.tools import sandbox
    from vikingbot.tools.base import ToolContext
    from vikingbot.tools.shell import ExecTool

    print("2. environment of an unattended exec in the sandbox")
    if sandbox.available() is None:
        print(f"   skipped: {sandbox.unavailable_reason()}")
        return
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-secret")
    os.environ.setdefault("SLACK_BOT_TOKEN", "xoxb-bench-secret")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        cfg = Config.model_validate({"bot": {"tools": {"exec": {"env": {"GIT_AUTHOR_NAME": "B"}}}}})
        ctx = ToolContext(
            Path(tmp), SessionKey("cron", "default", "b"), cfg, metadata={"unattended": True}
        )
        out = await ExecTool().run({"command": "env"}, ctx)
    names = sorted(line.split("=", 1)[0] for line in out.splitlines()[1:] if "=" in line)
    unlisted = [n for n in names if n not in LISTED and not n.startswith("LC_")]
    leaked = [n for n in names if n in ("OPENAI_API_KEY", "SLACK_BOT_TOKEN")]
    print(f"   gateway environment (inherited before issue 38): {len(os.environ)} variables")
    print(f"   visible in the sandbox: {len(names)} variables: {', '.join(names)}")
    print(f"   not on the list: {unlisted or 'none'}; API keys visible: {leaked or 'none'}"
          "  (target: only those listed)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calm", type=int, default=5)
    parser.add_argument("--flood", type=int, default=5000, help="updates in the flood mode")
    args = parser.parse_args()
    matrix(args.calm, args.flood)
    asyncio.run(sandbox_env())


if __name__ == "__main__":
    main()
