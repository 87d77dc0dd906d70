"""WorkspaceManager: sandbox modes, hostile keys, creation that never overwrites."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vikingbot.errors import WorkspaceError
from vikingbot.session.types import SessionKey
from vikingbot.workspace.manager import WorkspaceManager

TEMPLATE_FILES = {"HEARTBEAT.md", "SOUL.md", "USER.md", "AGENTS.md", "TOOLS.md", "memory/MEMORY.md"}
A = SessionKey("telegram", "default", "1")
B = SessionKey("telegram", "default", "2")
C = SessionKey("slack", "T01", "C02")


def files_in(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_shared_mode_puts_every_session_in_root_shared(tmp_path: Path) -> None:
    wm = WorkspaceManager(tmp_path / "ws")
    assert {wm.workspace_for(k) for k in (A, B, C)} == {tmp_path / "ws" / "shared"}
    assert files_in(tmp_path / "ws" / "shared") == TEMPLATE_FILES


def test_per_channel_mode_shares_within_a_channel_only(tmp_path: Path) -> None:
    wm = WorkspaceManager(tmp_path, "per-channel")
    assert wm.workspace_for(A) == wm.workspace_for(B)
    assert wm.workspace_for(A) != wm.workspace_for(C)
    assert wm.workspace_for(SessionKey("telegram", "other", "1")) != wm.workspace_for(A)


def test_per_session_mode_gives_each_session_its_own_folder(tmp_path: Path) -> None:
    wm = WorkspaceManager(tmp_path, "per-session")
    folders = {wm.workspace_for(k) for k in (A, B, C)}
    assert len(folders) == 3
    assert all(files_in(f) == TEMPLATE_FILES for f in folders)
    assert sorted(wm.list_workspaces()) == sorted(folders)


HOSTILE_KEYS = [
    SessionKey("webhook", "default", "../../etc"),
    SessionKey("..", "..", ".."),
    SessionKey("webhook", "a/b", "C:\\x"),
    SessionKey("CON", "NUL", "nul.txt"),
    SessionKey("webhook", "default", "a\0b"),
    SessionKey("webhook", "default", "9" * 300),
    SessionKey("🚀", "🔥", "💥"),
    SessionKey(".", "default", "."),
]


@pytest.mark.parametrize("mode", ["shared", "per-channel", "per-session"])
def test_hostile_keys_never_leave_the_root(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "root"
    wm = WorkspaceManager(root, mode)
    for key in HOSTILE_KEYS:
        path = wm.workspace_for(key)
        assert path.resolve().parent == root.resolve()
        assert path.is_dir()
    outside = {p.name for p in tmp_path.iterdir()}
    assert outside == {"root"}
    if mode == "per-session":
        assert len(wm.list_workspaces()) == len(HOSTILE_KEYS)


def test_existing_files_are_never_overwritten(tmp_path: Path) -> None:
    ws = tmp_path / "shared"
    (ws / "memory").mkdir(parents=True)
    (ws / "HEARTBEAT.md").write_text("- every: 1h title: Mine task: keep me\n", "utf-8")
    (ws / "SOUL.md").write_bytes(b"")
    (ws / "memory" / "MEMORY.md").write_text("I remember.\n", "utf-8")
    os.symlink(tmp_path / "elsewhere.md", ws / "USER.md")  # dangling on purpose

    wm = WorkspaceManager(tmp_path)
    assert wm.workspace_for(A) == ws
    assert (ws / "HEARTBEAT.md").read_text("utf-8") == "- every: 1h title: Mine task: keep me\n"
    assert (ws / "SOUL.md").read_bytes() == b""
    assert (ws / "memory" / "MEMORY.md").read_text("utf-8") == "I remember.\n"
    assert (ws / "USER.md").is_symlink() and not (tmp_path / "elsewhere.md").exists()
    assert (ws / "AGENTS.md").is_file() and (ws / "TOOLS.md").is_file()


def test_files_deleted_later_come_back_from_the_template_on_the_next_start(
    tmp_path: Path,
) -> None:
    WorkspaceManager(tmp_path).workspace_for(A)
    (tmp_path / "shared" / "SOUL.md").unlink()
    (tmp_path / "shared" / "USER.md").write_text("Name: Ada\n", "utf-8")
    WorkspaceManager(tmp_path).workspace_for(A)
    assert (tmp_path / "shared" / "SOUL.md").is_file()
    assert (tmp_path / "shared" / "USER.md").read_text("utf-8") == "Name: Ada\n"


def test_path_for_creates_nothing(tmp_path: Path) -> None:
    wm = WorkspaceManager(tmp_path / "ws", "per-session")
    path = wm.path_for(A)
    assert path.parent == tmp_path / "ws"
    assert not (tmp_path / "ws").exists()
    assert wm.list_workspaces() == []


def test_list_workspaces_ignores_files_and_hidden_folders(tmp_path: Path) -> None:
    wm = WorkspaceManager(tmp_path, "per-channel")
    made = wm.workspace_for(A)
    (tmp_path / ".trash").mkdir()
    (tmp_path / "notes.txt").write_text("x", "utf-8")
    assert wm.list_workspaces() == [made]


def test_unknown_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="unknown sandbox mode 'per-peer'"):
        WorkspaceManager(tmp_path, "per-peer")


def test_ensure_refuses_a_folder_outside_the_root(tmp_path: Path) -> None:
    wm = WorkspaceManager(tmp_path / "root")
    with pytest.raises(WorkspaceError, match="not a folder directly in"):
        wm.ensure(tmp_path / "elsewhere")
    with pytest.raises(WorkspaceError):
        wm.ensure(tmp_path / "root" / "a" / "b")
    assert not (tmp_path / "elsewhere").exists()
