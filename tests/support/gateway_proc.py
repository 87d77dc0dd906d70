"""Run `vikingbot gateway` as a real child process (tests and benches).

with GatewayProcess(home) as gw:      # waits until /health answers
    gw.get("/health")
gw.returncode                          # after a clean SIGTERM: 0

with both_started(home) as (a, b):    # two gateways on one (PostgreSQL) home
    ...
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support import forkserver
from tests.support.forkserver import Forked
from tests.support.ports import free_port


class GatewayProcess:
    def __init__(
        self,
        home: Path,
        *,
        port: int | None = None,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        start_timeout_s: float = 60.0,
        log: Path | None = None,
        fork: bool = True,
    ) -> None:
        self.home = home
        self.log = log or home / "gateway.out"  # several gateways on one home: one each
        self.port = port or free_port()
        self.env = {
            **os.environ,
            "VIKINGBOT_HOME": str(home),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.env.pop("VIKINGBOT_CONFIG", None)
        self.args = args or []
        self.start_timeout_s = start_timeout_s
        self.fork = fork  # from the test fork server when the tests have one (forkserver.py)
        self.proc: subprocess.Popen[str] | Forked | None = None
        self.output = ""
        self.returncode: int | None = None
        self.started_in_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> GatewayProcess:
        home_log = self.log
        self.home.mkdir(parents=True, exist_ok=True)
        self._log = home_log.open("w")
        t0 = time.monotonic()
        argv = ["gateway", "--port", str(self.port), *self.args]
        self.proc = forkserver.spawn(argv, env=self.env, stdout=self._log, fork=self.fork)
        info = Path(self.env["VIKINGBOT_HOME"]) / "run" / "gateway.json"
        deadline = t0 + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._finish()
                raise RuntimeError(f"gateway exited with {self.returncode}:\n{self.output}")
            try:
                self.get("/health", timeout=0.5)
            except OSError:
                time.sleep(0.05)
                continue
            if not info.exists():  # /health answers a moment before clients can find it
                time.sleep(0.05)
                continue
            self.started_in_s = time.monotonic() - t0
            return self
        self.kill()
        raise RuntimeError(
            f"gateway did not answer /health (and publish run/gateway.json) in {self.start_timeout_s}s:\n{self.output}"
        )

    def get(self, path: str, timeout: float = 5.0) -> Any:
        with urllib.request.urlopen(self.base_url + path, timeout=timeout) as resp:
            body = resp.read().decode()
            ctype = resp.headers.get("content-type", "")
        return json.loads(body) if "json" in ctype else body

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._finish()
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._finish()

    def _finish(self) -> None:
        assert self.proc is not None
        self.returncode = self.proc.returncode
        if not self._log.closed:
            self._log.close()
        self.output = self.log.read_text(errors="replace")

    def read_output(self) -> str:
        return self.log.read_text(errors="replace")

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()


def write_shared_home(
    home: Path,
    database_url: str,
    *,
    channels: dict[str, Any],
    llm_url: str | None = None,
    **bot: Any,
) -> Path:
    """Write the config of a home several gateways share through ``database_url``:
    ``channels`` (the terminal channel off), the fake OpenAI server at ``llm_url``
    when given, a 2 s shutdown grace, and ``bot``'s sections over these."""
    section: dict[str, Any] = {
        "channels": {"cli": {"enabled": False}, **channels},
        "gateway": {"shutdown_grace_s": 2},
    }
    if llm_url is not None:
        section["agents"] = {"provider": "openai", "model": "fake-model"}
        section["providers"] = {
            "openai": {"api_base": llm_url, "api_key": "sk-t", "max_retries": 0}
        }
    section.update(bot)
    home.mkdir(parents=True, exist_ok=True)
    config = {"bot": section, "storage": {"database_url": database_url}}
    (home / "config.json").write_text(json.dumps(config))
    return home


@contextmanager
def both_started(home: Path) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    """Two gateways on ``home``, started at once (one after the other cost twice the
    start, seconds on a busy machine); each still running at the end is stopped."""
    a, b = (GatewayProcess(home, start_timeout_s=120, log=home / f"gw-{n}.out") for n in "ab")
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(GatewayProcess.start, (a, b)))
        yield a, b
    finally:
        for gw in (a, b):
            if gw.proc is not None and gw.proc.poll() is None:
                gw.stop()
