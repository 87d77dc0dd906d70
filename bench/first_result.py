"""A fresh home following the README (issue 30): seconds from `gateway` to the first result.

What a stranger does, in the README's order, with nothing but the README: start
`vikingbot gateway` on a home that does not exist yet, then in a second terminal
`config set` the provider, the model and the key, put the README's tasks into
`<home>/data/workspace/shared/HEARTBEAT.md` and configure the `github` checker. Nobody chats. The one line the README
does not have points the provider at a scripted OpenAI server on loopback
(`bot.providers.openai.api_base`).

Printed: seconds from starting `gateway` to the first heartbeat result in the inbox
(`vikingbot inbox --json`, polled as a user would), seconds from saving the file to
it, and beside them the heartbeat interval, the target (the result within the first
cycle after the file is saved). The interval is the README's default (600 s) unless
``--interval`` sets `bot.heartbeat.interval_seconds` first (as a user may).

    uv run --all-extras --dev python bench/first_result.py [--interval 600]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.gateway_proc import GatewayProcess
from vikingbot.testing.fake_openai import FakeOpenAI, reply

README_TASKS = """## Active Tasks

- Tell me if a line in ~/notes/todo.md is due within a day.
- daily: 07:00 title: Weather task: Check the weather for Berlin and tell me if it will rain tomorrow.
- every: 30m only-if: github:prs title: Reviews task: Summarise new review requests.
- daily: 08:30 title: Morning brief task: Give me today's calendar and open todos.
"""
RESULT = "The dentist appointment in todo.md is tomorrow at 10:00."


def vikingbot(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One command in the "second terminal" (its own environment: no key exported)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIKINGBOT_", "OPENAI_"))}
    env["VIKINGBOT_HOME"] = str(home)
    argv = [sys.executable, "-m", "vikingbot", *args]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and args[0] != "inbox":
        raise SystemExit(f"vikingbot {' '.join(args)} failed:\n{done.stderr}")
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=int, default=None, help="interval_seconds to set")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI.start(require_key="sk-bench") as llm:
        llm.default = reply(RESULT)
        home = Path(tmp) / "home"
        env = {"OPENAI_API_KEY": ""}  # the gateway's terminal has no key either
        gw = GatewayProcess(home, env=env, start_timeout_s=120, fork=False)
        t0 = time.time()
        gw.start()
        try:
            lines = [
                ("config", "set", "bot.agents.provider", "openai"),
                ("config", "set", "bot.agents.model", "gpt-4o-mini"),
                ("config", "set", "bot.providers.openai.api_key", "sk-bench"),
                ("config", "set", "bot.providers.openai.api_base", llm.base_url),
            ]
            if opts.interval is not None:
                lines.append(
                    ("config", "set", "bot.heartbeat.interval_seconds", str(opts.interval))
                )
            for line in lines:
                vikingbot(home, *line)
            hb = home / "data" / "workspace" / "shared" / "HEARTBEAT.md"
            hb.write_text(README_TASKS, encoding="utf-8")
            saved = time.time()
            vikingbot(home, "config", "set", "bot.heartbeat.checkers.github", '{"kind": "github"}')
            while True:
                out = vikingbot(home, "inbox", "--json")
                items = json.loads(out.stdout) if out.returncode == 0 and out.stdout else []
                items = [i for i in items if i["source"] == "heartbeat:shared"]  # not notices
                if items:
                    break
                if time.time() - saved > 1800:
                    raise SystemExit("no result in the inbox after 30 minutes")
                time.sleep(1.0)
            # when the gateway put it there (not when this loop of CLI calls noticed)
            got = datetime.fromisoformat(items[0]["created_at"]).timestamp()
            interval = opts.interval or 600  # the README's default
        finally:
            gw.stop()
    print("fresh home, the README's lines in order, gateway already running, nobody chats")
    print(f"first heartbeat result in the inbox: {got - t0:.1f} s after `vikingbot gateway`")
    print(f"  of which after saving HEARTBEAT.md: {got - saved:.1f} s")
    print(f"heartbeat interval: {interval} s (target: the result within one interval of saving)")
    print(f"inbox item: {items[0]['text']!r}; model calls: {len(llm.requests)}")


if __name__ == "__main__":
    main()
