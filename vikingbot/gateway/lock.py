"""One gateway per home: an OS lock, the gateway's address file and the control secret.

Files under ``<home>/run/``:

- ``gateway.lock``: held with ``flock(LOCK_EX)`` for the gateway's whole life. The
  kernel drops it when the process dies (even on SIGKILL), so a stale file never
  blocks a start; the file itself is never removed.
- ``gateway.json``: pid, address and start time of the gateway that holds the
  lock (written after the lock is taken; only informative, the lock decides).
- ``control.secret``: the bearer secret of the control API, mode 0600, written at
  start and never printed. Clients on this machine read it; nobody else can.

With a PostgreSQL store several gateways may share one home (they coordinate in
the database), so :func:`needs_home_lock` says whether the file lock applies.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from vikingbot.errors import VikingbotError

LOCK_FILE = "gateway.lock"
INFO_FILE = "gateway.json"
SECRET_FILE = "control.secret"
MAX_INFO_BYTES = 16_384


class GatewayRunning(VikingbotError):
    """Another gateway holds this home."""


def run_dir(home: Path) -> Path:
    return home / "run"


def needs_home_lock(database_url: str) -> bool:
    """Only the embedded (SQLite) store is limited to one gateway per home."""
    return database_url.startswith("sqlite")


@dataclass(frozen=True)
class GatewayInfo:
    pid: int
    host: str
    port: int
    started_at: str
    version: str = ""
    shared: bool = False  # several gateways share the home (PostgreSQL store): no file lock

    @property
    def url(self) -> str:
        host = self.host
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def describe(self) -> str:
        return f"pid {self.pid}, {self.url}"

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "host": self.host,
            "port": self.port,
            "started_at": self.started_at,
            "version": self.version,
            "shared": self.shared,
        }


def read_info(home: Path) -> GatewayInfo | None:
    """The address file, or None when missing or not what a gateway writes."""
    try:
        with (run_dir(home) / INFO_FILE).open("rb") as fh:
            raw = fh.read(MAX_INFO_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_INFO_BYTES:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    pid, host, port = data.get("pid"), data.get("host"), data.get("port")
    if not isinstance(pid, int) or not isinstance(host, str) or not isinstance(port, int):
        return None
    if isinstance(pid, bool) or isinstance(port, bool) or not 0 < port < 65536 or pid <= 0:
        return None
    started = data.get("started_at")
    version = data.get("version")
    return GatewayInfo(
        pid,
        host,
        port,
        started if isinstance(started, str) else "",
        version if isinstance(version, str) else "",
        data.get("shared") is True,
    )


def read_secret(home: Path) -> str | None:
    try:
        with (run_dir(home) / SECRET_FILE).open("r", encoding="ascii") as fh:
            text = fh.read(256).strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def lock_is_held(home: Path) -> bool:
    """Whether some process holds the home's gateway lock (probe without keeping it)."""
    import fcntl

    path = run_dir(home) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600, atomically (temp file + rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class HomeLock:
    """The running gateway's hold on its home (see the module docstring)."""

    def __init__(self, home: Path, *, exclusive: bool = True) -> None:
        self.home = home
        self.dir = run_dir(home)
        self.exclusive = exclusive
        self._fh: IO[bytes] | None = None
        self.secret: str | None = None

    def acquire(self) -> None:
        """Take the lock (exclusive mode) and write a fresh control secret.

        Raises :class:`GatewayRunning` naming the holder when another gateway is alive.
        """
        import fcntl

        self.dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(self.dir, 0o700)
        if self.exclusive:
            fh = (self.dir / LOCK_FILE).open("a+b")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                info = read_info(self.home)
                who = info.describe() if info else "another process"
                raise GatewayRunning(
                    f"a gateway is already running for {self.home} ({who}); "
                    "stop it first, or use another VIKINGBOT_HOME"
                ) from None
            self._fh = fh
            self.secret = secrets.token_urlsafe(32)
            _write_private(self.dir / SECRET_FILE, self.secret + "\n")
        else:
            # several gateways share the home: keep the secret the first one wrote
            existing = read_secret(self.home)
            self.secret = existing or secrets.token_urlsafe(32)
            if existing is None:
                _write_private(self.dir / SECRET_FILE, self.secret + "\n")

    def publish(self, info: GatewayInfo) -> None:
        """Write the address file (after the HTTP server listens)."""
        info = GatewayInfo(**{**info.to_json(), "shared": not self.exclusive})
        _write_private(self.dir / INFO_FILE, json.dumps(info.to_json()) + "\n")

    def release(self) -> None:
        """Remove the address file and drop the lock (the kernel would too, on exit)."""
        import fcntl

        if self._fh is None:
            return
        info = read_info(self.home)
        if info is not None and info.pid == os.getpid():
            with contextlib.suppress(OSError):
                (self.dir / INFO_FILE).unlink()
        with contextlib.suppress(OSError):
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
        self._fh.close()
        self._fh = None
