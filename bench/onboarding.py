"""From a fresh home to the first answered chat, through `vikingbot onboard`.

A real `vikingbot onboard` in a pseudo-terminal (pexpect), every question answered
with its default (Enter) except the API base URL (the fake OpenAI server's loopback
address, which a user of the provider's own API leaves empty) and the API key
(typed, as by a user whose shell has no OPENAI_API_KEY); the key is tested with one
call. Then `vikingbot chat -m hello` in a fresh process gives the first answer.

Printed: keys pressed (Enter counted; the URL's keys apart), seconds from starting
`onboard` to the first answer printed (the model answers at once; the machine's own
time, without a person's thinking), and the same seconds for the baseline in the
same run: the four `config set` lines the README had before, typed as commands.

    uv run --dev python bench/onboarding.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pexpect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vikingbot.testing.fake_openai import FakeOpenAI, reply

KEY = "sk-bench-0123456789abcdef"


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIKINGBOT_", "OPENAI_"))}
    # a real terminal answers prompt_toolkit's cursor-position request at once; pexpect
    # does not, so the request is switched off rather than waited out at every question
    env.update(
        {"VIKINGBOT_HOME": str(home), "TERM": "xterm", "TZ": "UTC", "PROMPT_TOOLKIT_NO_CPR": "1"}
    )
    return env


def onboard(home: Path, base_url: str) -> tuple[int, int]:
    """(keys pressed, of which the URL's) for the default path."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "vikingbot", "onboard"],
        env=env_for(home),
        encoding="utf-8",
        timeout=120,
        dimensions=(40, 120),
    )
    keys = url_keys = 0
    plan = [
        ("Agent loop", ""),
        ("Model provider", ""),
        ("Model", ""),
        ("API base URL", base_url),
        ("API key", KEY),
        ("Chat platform", ""),
        ("Timezone", ""),
        ("Task for HEARTBEAT.md", ""),
        ("Run the gateway as a service", ""),
    ]
    for question, text in plan:
        child.expect(question)
        child.send(text + "\r")
        keys += len(text) + 1
        if question.startswith("API base"):
            url_keys = len(text)
    child.expect(pexpect.EOF)
    child.close()
    if child.exitstatus != 0:
        raise SystemExit(f"onboard failed: {child.before}")
    return keys, url_keys


def chat(home: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "vikingbot", "chat", "-m", "hello"],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"chat failed: {done.stderr}")
    return done.stdout.strip()


def config_lines(home: Path, base_url: str) -> int:
    """The baseline: what the README asked before, as separate commands; keys typed."""
    lines = [
        ["config", "set", "bot.agents.provider", "openai"],
        ["config", "set", "bot.agents.model", "gpt-4o-mini"],
        ["config", "set", "bot.providers.openai.api_base", base_url],
        ["config", "set", "bot.providers.openai.api_key", KEY],
    ]
    keys = 0
    for args in lines:
        subprocess.run(
            [sys.executable, "-m", "vikingbot", *args],
            env=env_for(home),
            check=True,
            capture_output=True,
            timeout=120,
        )
        keys += len("vikingbot " + " ".join(args)) + 1
    return keys


def main() -> None:
    with FakeOpenAI.start() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.script([reply("ok")] + [reply("Hello! How can I help?")] * 2)
        t0 = time.monotonic()
        keys, url_keys = onboard(Path(tmp) / "onboard", fake.base_url)
        answer = chat(Path(tmp) / "onboard")
        took = time.monotonic() - t0
        t1 = time.monotonic()
        base_keys = config_lines(Path(tmp) / "manual", fake.base_url)
        base_answer = chat(Path(tmp) / "manual")
        base_took = time.monotonic() - t1
    print(
        f"vikingbot onboard + first chat: {keys} keys pressed ({keys - url_keys} without the "
        f"test server's URL; {keys - url_keys - len(KEY) - 1}, all Enter, with OPENAI_API_KEY "
        f"in the environment), {took:.1f} s of machine time to the first answer "
        f"{answer[:40]!r}"
    )
    print(
        f"baseline: four `config set` lines + first chat: {base_keys} keys typed, "
        f"{base_took:.1f} s of machine time to the first answer {base_answer[:40]!r}"
    )


if __name__ == "__main__":
    main()
