"""A gateway imports a platform's or a provider's SDK only when its config uses it.

The SDKs are the heaviest part of a start (openai alone is over a second of CPU):
a terminal-only home (the ``cli`` channel, the ``command`` provider) must start,
and answer a chat turn, without any of them. What the real ``vikingbot gateway``
process holds is its ``sys.modules``: a ``sitecustomize`` on ``PYTHONPATH`` (the
interpreter imports it at start) writes the names to a file on SIGUSR1.
(``-X importtime`` would not do: it misses modules loaded with
``importlib.import_module``, which is how the registry loads a plug-in.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import poll

SDKS = ("openai", "anthropic", "telegram", "slack_sdk", "aiohttp", "psycopg", "playwright", "acp")

DUMPER = """
import os, signal, sys

def _dump(signum, frame):
    path = os.environ["VIKINGBOT_TEST_MODULES_TO"]
    with open(path + ".part", "w") as out:
        out.write("\\n".join(sorted(sys.modules)))
    os.replace(path + ".part", path)

signal.signal(signal.SIGUSR1, _dump)
"""


def test_a_terminal_only_gateway_imports_no_chat_platform_or_model_sdk(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    answer = [sys.executable, "-c", "print('Here, on the terminal.')"]
    config = {
        "bot": {
            "agents": {"provider": "command", "model": "local"},
            "providers": {"command": {"command": answer}},
            "channels": {"cli": {"enabled": True}},
            "heartbeat": {"timezone": "UTC"},
        }
    }
    (home / "config.json").write_text(json.dumps(config))
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(DUMPER)
    dump = tmp_path / "modules.txt"
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
    env["VIKINGBOT_HOME"] = str(home)

    gw = GatewayProcess(home, env={"PYTHONPATH": path, "VIKINGBOT_TEST_MODULES_TO": str(dump)})
    with gw:
        chat = subprocess.run(
            [sys.executable, "-m", "vikingbot", "chat", "-m", "hi", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert chat.returncode == 0, chat.stderr
        assert json.loads(chat.stdout)["via"] == "gateway"
        assert "Here, on the terminal." in chat.stdout
        assert gw.proc is not None
        gw.proc.send_signal(signal.SIGUSR1)
        modules = poll(lambda: dump.exists() and dump.read_text().split(), "the module list")
    assert "vikingbot.providers.command" in modules  # the turn ran in this process
    loaded = {m.split(".")[0] for m in modules}
    assert [sdk for sdk in SDKS if sdk in loaded] == []
