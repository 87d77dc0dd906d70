"""Client tokens for the gateway's ecosystem doors (the OpenAI-compatible API, MCP).

``vikingbot api token add NAME`` makes a token for the client ``NAME`` and shows it
once; the file ``<data>/api/tokens.json`` (0600) keeps only its SHA-256, the
client's name, when it was made and its scopes. A token names its client, so
each client's conversations are its own sessions (``api:<client>:<conversation>``).

Scopes: ``chat`` (``/v1/chat/completions``), ``mcp`` (the MCP server's read tools)
and ``mcp-write`` (its tools that change something: add or complete a heartbeat
entry, run one now, message the owner). The file is written under its lock,
merge-safe (``fsutil.locked_edit``); the gateway re-reads it when it changes, so
a revoked token stops working at its next request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from vikingbot.errors import ConfigError
from vikingbot.fsutil import locked_edit

Scope = Literal["chat", "mcp", "mcp-write"]
SCOPES: tuple[Scope, ...] = ("chat", "mcp", "mcp-write")
PREFIX = "vbk_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def tokens_file(data_dir: Path) -> Path:
    return data_dir / "api" / "tokens.json"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a client (it is part of session keys), or None. Pure."""
    if not _NAME.match(name):
        return (
            f"client name {name[:80]!r} must be 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return None


@dataclass(frozen=True)
class Client:
    name: str
    scopes: tuple[Scope, ...]
    created: str
    sha256: str

    def allows(self, scope: Scope) -> bool:
        return scope in self.scopes


def parse(text: str) -> dict[str, Client]:
    """The file's clients; malformed rows are left out (never an exception). Pure."""
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    rows = data.get("clients") if isinstance(data, dict) else None
    out: dict[str, Client] = {}
    if not isinstance(rows, dict):
        return out
    for name, row in rows.items():
        if not isinstance(name, str) or name_problem(name) or not isinstance(row, dict):
            continue
        sha = row.get("sha256")
        scopes = row.get("scopes")
        if not isinstance(sha, str) or not isinstance(scopes, list):
            continue
        kept = tuple(s for s in SCOPES if s in scopes)
        out[name] = Client(name, kept, str(row.get("created", "")), sha)
    return out


def _dump(clients: dict[str, Client]) -> str:
    rows = {
        c.name: {"sha256": c.sha256, "scopes": list(c.scopes), "created": c.created}
        for c in sorted(clients.values(), key=lambda c: c.name)
    }
    return json.dumps({"clients": rows}, indent=2) + "\n"


class TokenStore:
    """The client tokens of one home."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        self._clients: dict[str, Client] = {}

    def clients(self) -> dict[str, Client]:
        """The clients, read again when the file changed."""
        try:
            st = self.path.stat()
        except OSError:
            self._seen, self._clients = None, {}
            return {}
        seen = (st.st_mtime_ns, st.st_size)
        if seen != self._seen:
            try:
                text = self.path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return {}
            self._clients, self._seen = parse(text), seen
        return self._clients

    def check(self, token: str) -> Client | None:
        """The client ``token`` belongs to, or None (constant time per client)."""
        if not token.startswith(PREFIX) or len(token) > 200:
            return None
        want = digest(token)
        found = None
        for client in self.clients().values():
            if hmac.compare_digest(client.sha256, want):
                found = client
        return found

    def add(self, name: str, scopes: tuple[Scope, ...]) -> str:
        """A new token for ``name`` (replacing its old one); returned once, stored hashed."""
        problem = name_problem(name)
        if problem:
            raise ConfigError(problem)
        token = PREFIX + secrets.token_urlsafe(32)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        client = Client(name, tuple(s for s in SCOPES if s in scopes), now, digest(token))

        def edit(text: str) -> str:
            clients = parse(text)
            clients[name] = client
            return _dump(clients)

        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        locked_edit(self.path, edit, error=ConfigError, mode=0o600)
        return token

    def revoke(self, name: str) -> bool:
        """Forget ``name``'s token; True when there was one."""
        gone = False

        def edit(text: str) -> str:
            nonlocal gone
            clients = parse(text)
            gone = clients.pop(name, None) is not None
            return _dump(clients)

        if not self.path.exists():
            return False
        locked_edit(self.path, edit, error=ConfigError, mode=0o600)
        return gone

    def listing(self) -> list[dict[str, Any]]:
        return [
            {"name": c.name, "scopes": list(c.scopes), "created": c.created}
            for c in sorted(self.clients().values(), key=lambda c: c.name)
        ]
