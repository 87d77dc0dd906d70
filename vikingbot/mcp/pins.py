"""Which server an approval was given for: ``<data>/mcp/approved.json``.

A list entry that approves a server's tools (``mcp_<server>_<tool>``,
``mcp_<server>_*``) approves that server *as configured when it was first approved*:
its command line or URL (``McpServerConfig.identity``). The first approved call of a
server records its identity here; when the entry later points elsewhere, its tools
are refused until the owner approves the new one (``vikingbot mcp trust NAME``, or
``vikingbot mcp add`` / ``remove``, which the owner runs). An unreadable file counts
as empty for reading and is never written over by a guess.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from loguru import logger

from vikingbot.fsutil import atomic_write_text
from vikingbot.redact import mask_identity


class Pins:
    """Server name -> the identity its approvals were given for."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[tuple[int, int, int], dict[str, str]] | None = None

    def _read(self) -> dict[str, str]:
        """The file's map; read again only when its identity (inode, mtime, size) moved."""
        if self.path is None:
            return {}
        try:
            st = self.path.stat()
        except OSError:
            return {}
        ident = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._seen is not None and self._seen[0] == ident:
            return dict(self._seen[1])
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning("{}: unreadable ({}); MCP approvals are not pinned", self.path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        found = {str(k): str(v) for k, v in data.items() if isinstance(v, str)}
        self._seen = (ident, found)
        return dict(found)

    def get(self, server: str) -> str | None:
        return self._read().get(server)

    def set(self, server: str, identity: str | None) -> None:
        """Record (or with ``None`` forget) the identity approvals of ``server`` are for."""
        if self.path is None:
            return
        with self._lock:
            data = self._read()
            if identity is None:
                data.pop(server, None)
            else:
                data[server] = identity
            self.path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
            atomic_write_text(self.path, text, mode=0o600)


def fingerprint(identity: str) -> str:
    """What is recorded of an identity: a digest (compared) and the masked text (shown)."""
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return f"{digest} {mask_identity(identity)[:200]}"


def same(recorded: str, identity: str) -> bool:
    """Whether ``recorded`` (a ``fingerprint``) is of ``identity``."""
    return recorded.split(" ", 1)[0] == fingerprint(identity).split(" ", 1)[0]
