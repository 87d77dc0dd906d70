"""Which workspaces a heartbeat cycle looks at, and what it reads there.

Blocking I/O, run in a worker thread. Everything is cached so that a cycle over
thousands of quiet workspaces costs little more than one ``stat`` per
HEARTBEAT.md: sessions are grouped by workspace once per change of the session
listing, files are parsed once per change of their mtime/size, and a quiet
workspace (stale, template, no sessions) whose inputs did not change reuses its
previous decisions.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vikingbot.config.schema import HeartbeatConfig
from vikingbot.heartbeat.planner import Decision, WorkspaceInput
from vikingbot.heartbeat.state import HeartbeatState, WorkspaceState
from vikingbot.heartbeat.types import ParseResult
from vikingbot.session.types import SessionKey, SessionMeta

if TYPE_CHECKING:
    from vikingbot.runtime import Runtime

IGNORED_SESSION_TYPES = frozenset({"heartbeat", "cron"})
# Skips that depend only on the sessions and the file, never on the clock's cadence.
QUIET_REASONS = frozenset({"stale", "skip-flag", "empty", "no-sessions"})


class Scanner:
    def __init__(self, rt: Runtime, state: Callable[[], HeartbeatState], busy: set[str]) -> None:
        self.rt = rt
        self._state = state
        self.busy = busy  # shared with the service: workspaces whose cycle is running
        self._files: dict[str, tuple[int, int, ParseResult]] = {}
        self._ws_of: dict[tuple[str, SessionKey], str] = {}
        self._grouped: Any = None
        self.quiet: dict[str, tuple[Any, list[Decision]]] = {}
        self._hb_paths: dict[str, str] = {}  # workspace -> HEARTBEAT.md path

    @property
    def cfg(self) -> HeartbeatConfig:
        return self.rt.config.bot.heartbeat

    def now(self) -> datetime:
        return self.rt.clock.now()

    def read_file(self, path: Path | str) -> ParseResult:
        """HEARTBEAT.md parsed, re-read only when its mtime or size changed."""
        from vikingbot.heartbeat.parser import read_heartbeat

        key = str(path)
        try:
            st = os.stat(key)
        except FileNotFoundError:
            self._files.pop(key, None)
            return ParseResult(missing=True)
        except OSError as exc:
            return ParseResult(unreadable=f"cannot stat: {exc.strerror}")
        cached = self._files.get(key)
        if cached and cached[0] == st.st_mtime_ns and cached[1] == st.st_size:
            return cached[2]
        result = read_heartbeat(Path(key), max_bytes=self.cfg.max_file_bytes)
        self._files[key] = (st.st_mtime_ns, st.st_size, result)
        return result

    def workspace_id(self, path: Path) -> str:
        try:
            return path.relative_to(self.rt.paths.workspace_root).as_posix()
        except ValueError:
            return path.name

    def workspace_of(self, key: SessionKey) -> str:
        """Workspace name of a session (cached: resolving a path costs syscalls)."""
        mode = self.rt.config.bot.sandbox.mode
        cached = self._ws_of.get((mode, key))
        if cached is None:
            cached = self.workspace_id(self.rt.workspaces.path_for(key))
            self._ws_of[(mode, key)] = cached
        return cached

    def workspace_path(self, name: str) -> Path:
        return self.rt.paths.workspace_root / name

    def groups(self) -> tuple[dict[str, list[SessionMeta]], dict[str, datetime | None]]:
        """Sessions by workspace, and until when each workspace has an eligible session.

        Rebuilt only when the session listing changed (see ``SessionStore.snapshot``).
        """
        version, metas = self.rt.sessions.snapshot()
        key = (version, self.rt.config.bot.sandbox.mode, self.cfg.stale_after)
        if self._grouped is not None and self._grouped[0] == key:
            return self._grouped[1], self._grouped[2]
        groups: dict[str, list[SessionMeta]] = defaultdict(list)
        for meta in metas:
            if meta.key.type not in IGNORED_SESSION_TYPES:
                groups[self.workspace_of(meta.key)].append(meta)
        stale = timedelta(seconds=self.cfg.stale_after)
        fresh_until: dict[str, datetime | None] = {}
        for name, members in groups.items():
            times = [m.last_user_at for m in members if m.last_user_at and not m.skip_heartbeat]
            fresh_until[name] = max(times) + stale if times else None
        self._grouped = (key, dict(groups), fresh_until)
        return self._grouped[1], fresh_until

    def collect(
        self, only: str | None = None, *, include_idle: bool = True
    ) -> list[WorkspaceInput]:
        """Sessions grouped by workspace, with their files and state (blocking I/O).

        ``include_idle`` adds workspace folders no session uses (for plan/status).
        """
        inputs, _ = self.scan(only, include_idle=include_idle, memo=False)
        return inputs

    def scan(
        self,
        only: str | None,
        *,
        include_idle: bool,
        memo: bool,
    ) -> tuple[list[WorkspaceInput], list[Decision]]:
        """Inputs for the planner; with ``memo`` (a callable), quiet workspaces whose
        sessions and file did not change reuse their previous decisions instead."""
        self._state().refresh()
        groups, fresh_until = self.groups()
        if only is not None:
            groups = {only: groups.get(only, [])}
        elif include_idle:  # nobody talks to these: shown as no-sessions
            groups = dict(groups)
            root = self.rt.paths.workspace_root
            if root.is_dir():
                with os.scandir(root) as it:
                    for d in it:
                        if d.is_dir() and not d.name.startswith(".") and d.name not in groups:
                            groups[d.name] = []
        now = self.now()
        ws_states = self._state().all_workspaces()
        root_s = str(self.rt.paths.workspace_root)
        max_bytes = self.cfg.max_file_bytes
        listing = self._grouped[0] if self._grouped else None
        need_entries: list[WorkspaceInput] = []
        inputs: list[WorkspaceInput] = []
        reused: list[Decision] = []
        quiet = self.quiet
        paths = self._hb_paths
        busy = self.busy
        stat = os.stat
        for name in sorted(groups):
            until = fresh_until.get(name)
            eligible = until is not None and now <= until
            state = ws_states.get(name)
            path = None
            sig: Any = None
            if eligible:
                path = paths.get(name)
                if path is None:
                    path = paths[name] = os.path.join(root_s, name, "HEARTBEAT.md")
                try:
                    st = stat(path)
                    sig = (st.st_mtime_ns, st.st_size)
                except OSError:
                    sig = "missing"
            mkey = (listing, eligible, sig, state.paused if state else False, max_bytes)
            if memo and name not in busy:
                hit = quiet.get(name)
                if hit is not None and hit[0] == mkey:
                    reused.extend(hit[1])
                    continue
            parsed = self.read_file(path) if path is not None else None
            wsin = WorkspaceInput(
                name=name,
                sessions=groups[name],
                parsed=parsed,
                state=state or WorkspaceState(workspace=name),
                busy=name in self.busy,
                memo_key=mkey,
            )
            if parsed is not None and not parsed.is_empty:
                need_entries.append(wsin)
            inputs.append(wsin)
        if need_entries:
            by_ws: dict[str, dict[str, Any]] = defaultdict(dict)
            for (w, k), v in self._state().all_entries().items():
                by_ws[w][k] = v
            for wsin in need_entries:
                wsin.entries = by_ws.get(wsin.name, {})
        return inputs, reused
