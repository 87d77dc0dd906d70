"""A vikingbot home for end-to-end tests: `vikingbot gateway` as a real child process.

``Home`` is a temporary home whose config points the OpenAI provider at a
scripted fake model server and the Telegram channel at a fake Bot API, both
running in the test process; the owner's Telegram chat has a session with a
user message from just now, so the heartbeat considers it. ``poll`` waits for a
condition the child process brings about; ``with_tasks`` fills the shipped
HEARTBEAT.md template. The pytest fixtures live in ``tests/e2e/conftest.py``.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from tests.support import forkserver
from tests.support.fake_telegram import FakeTelegram
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message, SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI

OWNER_ID = 4242
OWNER_KEY = SessionKey("telegram", "default", str(OWNER_ID))
HB_KEY = SessionKey("heartbeat", "hb", "shared")
TEMPLATE_HEAD = "# Heartbeat Tasks"
TIMEOUT_S = 60.0  # generous: the machine running the suite may be busy

T = TypeVar("T")


def with_tasks(*lines: str) -> str:
    """The shipped HEARTBEAT.md template with ``lines`` under Active Tasks."""
    from vikingbot.workspace.template import template_dir

    template = (template_dir() / "HEARTBEAT.md").read_text(encoding="utf-8")
    marker = "below this line -->\n"
    assert marker in template, "the workspace template changed; update with_tasks()"
    return template.replace(marker, marker + "".join(f"{x}\n" for x in lines), 1)


@functools.cache
def _migrated_database() -> Path:
    """An empty state database at the newest revision, made once per process."""
    from vikingbot.store.db import StateStore

    folder = tempfile.mkdtemp(prefix="vikingbot-home-db-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = Path(folder) / "state.db"
    StateStore.open(f"sqlite:///{path}").close()  # the last close folds the WAL into the file
    return path


def poll(check: Callable[[], T | None], what: str, timeout: float = TIMEOUT_S) -> T:
    """Call ``check`` every 50 ms until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Home:
    """A vikingbot home prepared for one test, with helpers to look inside it."""

    path: Path
    llm: FakeOpenAI
    telegram: FakeTelegram
    telegram_api: str
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the state database as a first start leaves it (migrated, empty), copied from
        # one made once per process: migrating costs each home's first command or
        # gateway ~0.25 s of CPU, and first starts have their own tests
        db = self.data / "state.db"
        if not db.exists():
            db.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(_migrated_database(), db)

    @property
    def data(self) -> Path:
        return self.path / "data"

    def log_text(self) -> str:
        """The gateway's log file so far (INFO lines go there, not to the console)."""
        log = self.data / "logs" / "vikingbot.log"
        return log.read_text("utf-8", errors="replace") if log.exists() else ""

    @property
    def sessions_dir(self) -> Path:
        return self.data / "sessions"

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.data / 'state.db'}"

    def workspace(self, name: str = "shared") -> Path:
        return self.data / "workspace" / name

    def write_config(self, **bot: Any) -> None:
        """Write config.json: fakes wired in, ``bot`` sections merged over the base."""
        base: dict[str, Any] = {
            "owner": f"telegram:{OWNER_ID}",
            "agents": {"provider": "openai", "model": "fake-model"},
            "providers": {
                "openai": {"api_base": self.llm.base_url, "api_key": "sk-e2e", "max_retries": 0}
            },
            "channels": {
                "cli": {"enabled": False},
                "telegram": {
                    "enabled": True,
                    "token": self.telegram.token,
                    "api_base": self.telegram_api,
                    "allow_from": [str(OWNER_ID)],
                },
            },
            "heartbeat": {"timezone": "UTC"},
            "gateway": {"shutdown_grace_s": 5},
        }
        for key, value in bot.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                base[key] = {**base[key], **value}
            else:
                base[key] = value
        self.config = {"bot": base}
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "config.json").write_text(json.dumps(self.config, indent=2))

    def sessions(self) -> SessionStore:
        return SessionStore(self.sessions_dir)

    def add_user_session(self, key: SessionKey = OWNER_KEY, text: str = "hello") -> Path:
        """A session whose last user message is from now; returns its file."""
        store = self.sessions()
        store.get_or_create(key)
        store.append(key, Message(role="user", content=text, timestamp=datetime.now(UTC)))
        return store.path_for(key)

    def write_heartbeat(self, text: str, workspace: str = "shared") -> Path:
        folder = self.workspace(workspace)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "HEARTBEAT.md"
        path.write_text(text, encoding="utf-8")
        return path

    def next_cycle_in(self, seconds: float, *, interval_s: float) -> None:
        """Record the last heartbeat cycle as started so that, with the config's
        ``interval_s``, the next one is due ``seconds`` from now (as a gateway restarted
        before its interval is up finds it). For a test whose gateway should run its
        first cycle a little after it started: not at once, nor a whole interval later.
        Should the test be slower than that, the cycle finds nothing new and the next
        one comes an interval later, as without this."""
        from datetime import UTC, datetime, timedelta

        from vikingbot.heartbeat.service import GLOBAL
        from vikingbot.heartbeat.state import HeartbeatState
        from vikingbot.store.db import StateStore

        at = datetime.now(UTC) - timedelta(seconds=interval_s - seconds)
        store = StateStore.open(self.database_url)
        try:
            HeartbeatState(store).mark_cycle(GLOBAL, at)
        finally:
            store.close()

    # ---- reading state the gateway wrote ---------------------------------

    def ledger(self) -> list[dict[str, Any]]:
        """The heartbeat run ledger, newest first (opened and closed per call)."""
        from vikingbot.heartbeat.state import HeartbeatState
        from vikingbot.store.db import StateStore

        store = StateStore.open(self.database_url)
        try:
            return HeartbeatState(store).runs(limit=100)
        finally:
            store.close()

    def outbox(self) -> list[Any]:
        """Every outbox row, oldest first."""
        from vikingbot.delivery.outbox import Outbox
        from vikingbot.store.db import StateStore

        store = StateStore.open(self.database_url)
        try:
            return Outbox(store).rows()
        finally:
            store.close()

    def inbox(self) -> list[Any]:
        """Unread inbox items (results that reached no chat), oldest first."""
        from vikingbot.delivery.inbox import Inbox
        from vikingbot.store.db import StateStore

        store = StateStore.open(self.database_url)
        try:
            return Inbox(store).items()
        finally:
            store.close()

    def cli(self, *args: str, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """Run ``python -m vikingbot ARGS`` against this home."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIKINGBOT_")}
        env["VIKINGBOT_HOME"] = str(self.path)
        return forkserver.run(list(args), env=env, timeout=timeout)

    def cli_json(self, *args: str) -> Any:
        res = self.cli(*args, "--json")
        assert res.returncode == 0, f"vikingbot {' '.join(args)} failed:\n{res.stderr}"
        return json.loads(res.stdout)


def login_url(h: Home) -> str:
    """A one-time login link, from `vikingbot dashboard --no-open` as a user gets it."""
    res = h.cli("dashboard", "--no-open")
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()
