"""A real Synapse homeserver on loopback for the Matrix tests and bench.

Synapse is not our dependency: ``.ci/run`` installs ``matrix-synapse`` into its own
cached virtualenv (``~/.cache/vikingbot/synapse-venv``, or the interpreter named by
``VIKINGBOT_SYNAPSE_PYTHON``). :func:`start` writes a small config (SQLite, one
client listener on 127.0.0.1, no federation, registration by shared secret only),
starts the server and waits until it answers. Users come from the admin
registration API (:meth:`Synapse.register`); plain client calls go through httpx so
the tests look at the room with other eyes than the channel's SDK.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from tests.support.ports import free_port

VENV_PYTHON = Path.home() / ".cache" / "vikingbot" / "synapse-venv" / "bin" / "python"
START_TIMEOUT_S = 90.0
SERVER_NAME = "vikingbot.test"

CONFIG = """\
server_name: "{server_name}"
pid_file: "{root}/homeserver.pid"
public_baseurl: "http://127.0.0.1:{port}/"
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{root}/homeserver.db"
media_store_path: "{root}/media"
signing_key_path: "{root}/signing.key"
registration_shared_secret: "{secret}"
enable_registration: false
report_stats: false
bcrypt_rounds: 4
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
enable_metrics: false
presence:
  enabled: false
url_preview_enabled: false
rc_message:
  per_second: 0.5
  burst_count: 5
rc_registration:
  per_second: 1000
  burst_count: 1000
rc_login:
  address: {{per_second: 1000, burst_count: 1000}}
  account: {{per_second: 1000, burst_count: 1000}}
  failed_attempts: {{per_second: 1000, burst_count: 1000}}
rc_joins:
  local: {{per_second: 1000, burst_count: 1000}}
  remote: {{per_second: 1000, burst_count: 1000}}
rc_invites:
  per_room: {{per_second: 1000, burst_count: 1000}}
  per_user: {{per_second: 1000, burst_count: 1000}}
  per_issuer: {{per_second: 1000, burst_count: 1000}}
log_config: "{root}/log.yaml"
"""

LOG_CONFIG = """\
version: 1
formatters:
  plain: {{format: "%(asctime)s %(levelname)s %(name)s %(message)s"}}
handlers:
  file: {{class: logging.FileHandler, filename: "{root}/homeserver.log", formatter: plain}}
root: {{level: WARNING, handlers: [file]}}
disable_existing_loggers: false
"""


class SynapseMissing(RuntimeError):
    """Synapse is not installed where the rig looks for it."""


def synapse_python() -> Path:
    """The interpreter that has Synapse installed (raises :class:`SynapseMissing`)."""
    named = os.environ.get("VIKINGBOT_SYNAPSE_PYTHON")
    path = Path(named) if named else VENV_PYTHON
    if not path.exists():
        raise SynapseMissing(
            f"no Synapse interpreter at {path} (.ci/run installs matrix-synapse there)"
        )
    return path


@dataclass(frozen=True)
class User:
    user_id: str
    token: str
    device_id: str


class Synapse:
    """One running homeserver: its base URL, users by shared secret, a small client."""

    def __init__(self, root: Path, port: int, secret: str, proc: subprocess.Popen[bytes]) -> None:
        self.root = root
        self.port = port
        self.secret = secret
        self.proc = proc
        self.url = f"http://127.0.0.1:{port}"
        self.http = httpx.Client(base_url=self.url, timeout=30.0)

    # ---- users -----------------------------------------------------------

    def register(self, name: str | None = None, *, admin: bool = False) -> User:
        """A new user (admin registration API with the shared secret's HMAC)."""
        name = name or f"u{uuid.uuid4().hex[:10]}"
        password = secrets.token_hex(8)
        nonce = self.http.get("/_synapse/admin/v1/register").json()["nonce"]
        mac = hmac.new(self.secret.encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join([nonce.encode(), name.encode(), password.encode()]))
        mac.update(b"\x00admin" if admin else b"\x00notadmin")
        body = {
            "nonce": nonce,
            "username": name,
            "password": password,
            "admin": admin,
            "mac": mac.hexdigest(),
        }
        answer = self.http.post("/_synapse/admin/v1/register", json=body)
        answer.raise_for_status()
        data = answer.json()
        return User(data["user_id"], data["access_token"], data["device_id"])

    def unlimited(self, admin: User, user: User) -> None:
        """Lift ``user``'s message rate limit (the server's default is tight, for 429 tests)."""
        path = f"/_synapse/admin/v1/users/{quote(user.user_id)}/override_ratelimit"
        body = {"messages_per_second": 0, "burst_count": 0}
        self.call(admin, "POST", path, body)

    # ---- a plain client ----------------------------------------------------

    def call(self, user: User, method: str, path: str, body: Any = None) -> Any:
        answer = self.http.request(
            method, path, json=body, headers={"Authorization": f"Bearer {user.token}"}
        )
        answer.raise_for_status()
        return answer.json()

    def create_room(self, user: User, *, invite: list[str] = (), direct: bool = False) -> str:  # type: ignore[assignment]
        body: dict[str, Any] = {"invite": list(invite), "is_direct": direct}
        body["preset"] = "trusted_private_chat" if direct else "private_chat"
        return str(self.call(user, "POST", "/_matrix/client/v3/createRoom", body)["room_id"])

    def join(self, user: User, room: str) -> None:
        self.call(user, "POST", f"/_matrix/client/v3/join/{quote(room)}", {})

    def say(self, user: User, room: str, text: str, **extra: Any) -> str:
        txn = uuid.uuid4().hex
        path = f"/_matrix/client/v3/rooms/{quote(room)}/send/m.room.message/{txn}"
        body = {"msgtype": "m.text", "body": text, **extra}
        return str(self.call(user, "PUT", path, body)["event_id"])

    def messages(self, user: User, room: str, limit: int = 500) -> list[dict[str, Any]]:
        """The room's ``m.room.message`` events, oldest first."""
        path = f"/_matrix/client/v3/rooms/{quote(room)}/messages?dir=b&limit={limit}"
        chunk = self.call(user, "GET", path)["chunk"]
        found = [e for e in chunk if e.get("type") == "m.room.message"]
        return list(reversed(found))

    def texts(self, user: User, room: str, sender: str | None = None) -> list[str]:
        return [
            str(e["content"].get("body"))
            for e in self.messages(user, room)
            if sender is None or e.get("sender") == sender
        ]

    def logout(self, user: User) -> None:
        """Revoke ``user``'s access token."""
        self.call(user, "POST", "/_matrix/client/v3/logout", {})

    def stop(self) -> None:
        self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start(root: Path) -> Synapse:
    """Configure and start Synapse under ``root``; returns once it answers."""
    python = synapse_python()
    root.mkdir(parents=True, exist_ok=True)
    (root / "media").mkdir(exist_ok=True)
    port, secret = free_port(), secrets.token_hex(16)
    config = root / "homeserver.yaml"
    fields = {"server_name": SERVER_NAME, "root": root, "port": port, "secret": secret}
    config.write_text(CONFIG.format(**fields))
    (root / "log.yaml").write_text(LOG_CONFIG.format(root=root))
    app = [str(python), "-m", "synapse.app.homeserver", "-c", str(config)]
    subprocess.run([*app, "--generate-keys"], check=True, capture_output=True, timeout=120)
    with (root / "stdout.log").open("wb") as out:
        proc = subprocess.Popen(app, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    server = Synapse(root, port, secret, proc)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            log = (root / "stdout.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"Synapse exited with {proc.returncode} while starting:\n{log}")
        try:
            if server.http.get("/_matrix/client/versions").status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"Synapse did not answer within {START_TIMEOUT_S:.0f}s")
        time.sleep(0.1)  # polling a starting process: no event to wait on


if __name__ == "__main__":  # a manual check: start, register, stop
    import tempfile

    began = time.monotonic()
    hs = start(Path(tempfile.mkdtemp(prefix="synapse-")))
    print(f"Synapse up at {hs.url} in {time.monotonic() - began:.1f}s", file=sys.stderr)
    print(hs.register(admin=True))
    hs.stop()
