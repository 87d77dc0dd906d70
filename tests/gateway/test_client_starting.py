"""The CLI's client and a gateway that is starting (issue 9: publish before serving).

A gateway writes run/gateway.json once its port is bound and before it serves.
The client takes a refused connect to that address, while the recorded pid lives,
for "starting" and waits a bounded time; a dead pid is "not running any more".
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vikingbot.gateway.client import GatewayClient, GatewayUnavailable
from vikingbot.gateway.lock import GatewayInfo, HomeLock, run_dir


@pytest.fixture
def bound() -> Iterator[socket.socket]:
    """A loopback port that is bound but not listening: connects are refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    yield sock
    sock.close()


def publish(home: Path, pid: int, port: int) -> HomeLock:
    lock = HomeLock(home)
    lock.acquire()
    lock.publish(GatewayInfo(pid, "127.0.0.1", port, "2026-01-01T00:00:00+00:00"))
    return lock


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_refusing_port_of_a_live_pid_is_waited_for_then_reported(
    tmp_path: Path, bound: socket.socket
) -> None:
    lock = publish(tmp_path, os.getpid(), bound.getsockname()[1])
    try:
        client = GatewayClient.find(tmp_path, starting_wait_s=0.3)
        assert client is not None
        with pytest.raises(GatewayUnavailable, match=r"still starting after 0.3s"):
            client.get("/api/v1/heartbeat/status")
    finally:
        lock.release()


def test_a_refusing_port_of_a_dead_pid_is_not_waited_for(bound: socket.socket) -> None:
    info = GatewayInfo(dead_pid(), "127.0.0.1", bound.getsockname()[1], "")
    client = GatewayClient(info, "secret", starting_wait_s=60)
    with pytest.raises(GatewayUnavailable, match="is not running any more"):
        client.get("/api/v1/heartbeat/status")


def test_a_held_lock_with_a_dead_holders_record_is_waited_for(
    tmp_path: Path, bound: socket.socket
) -> None:
    """A new gateway holds the lock; the record is still the crashed one's."""
    lock = publish(tmp_path, dead_pid(), bound.getsockname()[1])
    try:
        assert GatewayClient.find(tmp_path, starting_wait_s=0.2) is None
    finally:
        lock.release()


def test_a_held_lock_without_a_record_is_a_gateway_starting(tmp_path: Path) -> None:
    lock = HomeLock(tmp_path)
    lock.acquire()  # holds the lock and writes the secret, has not published yet
    try:
        assert not (run_dir(tmp_path) / "gateway.json").exists()
        assert GatewayClient.find(tmp_path, starting_wait_s=0.2) is None  # bounded
    finally:
        lock.release()
