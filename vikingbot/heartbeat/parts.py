"""What the heartbeat is built from: explicit parts, not the whole runtime.

The composition root (the gateway, or a CLI command with no gateway running)
builds ``HeartbeatParts`` once (``vikingbot.gateway.compose.heartbeat`` does it
for both) and hands them to ``HeartbeatService``. The runner and the scanner
read only these attributes, so a test can build the heartbeat from fakes of
exactly these parts.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vikingbot.clock import Clock
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config

if TYPE_CHECKING:
    from vikingbot.agent.types import AgentLoop
    from vikingbot.delivery.service import DeliveryService
    from vikingbot.metrics import Metrics
    from vikingbot.session.store import SessionStore
    from vikingbot.store.db import StateStore
    from vikingbot.store.leases import Leases
    from vikingbot.workspace.manager import WorkspaceManager


def default_owner() -> str:
    """Who a claim names: this host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class HeartbeatParts:
    settings: Callable[[], Config]  # the current config (a reload applies without restart)
    store: StateStore
    sessions: SessionStore
    workspaces: WorkspaceManager
    agent: Callable[[], AgentLoop]
    delivery: DeliveryService
    clock: Clock
    paths: Paths
    environ: Mapping[str, str] = field(default_factory=dict)
    metrics: Metrics | None = None
    leases: Leases | None = None  # per-unit claims; None: one process, no claims
    owner: str = field(default_factory=default_owner)

    @property
    def config(self) -> Config:
        return self.settings()
