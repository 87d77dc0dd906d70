"""Which workspaces a heartbeat cycle looks at, and what it reads there.

Blocking I/O, run in a worker thread. What the sessions and HEARTBEAT.md files
hold comes from :class:`~vikingbot.heartbeat.index.HeartbeatIndex`, which keeps
it current from file system events (or cheap polling). A gateway cycle
(``memo``) plans again only the workspaces that changed, fell due (a session went
stale) or did something last time; a quiet workspace (stale, template, no
sessions) keeps its previous decisions. ``plan``/``collect`` plan every workspace.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vikingbot.config.schema import Config, HeartbeatConfig
from vikingbot.heartbeat.index import HeartbeatIndex
from vikingbot.heartbeat.planner import Decision, WorkspaceInput
from vikingbot.heartbeat.skills import names_skills, with_skill_problems
from vikingbot.heartbeat.state import HeartbeatState, WorkspaceState
from vikingbot.heartbeat.types import ParseResult
from vikingbot.session.store import SYSTEM_TYPES, SessionStore
from vikingbot.session.types import SessionKey, SessionMeta
from vikingbot.skills.discover import catalog

if TYPE_CHECKING:
    from vikingbot.clock import Clock

IGNORED_SESSION_TYPES = SYSTEM_TYPES
# Skips that depend only on the sessions and the file, never on the clock's cadence.
QUIET_REASONS = frozenset({"stale", "skip-flag", "empty", "no-sessions"})
_PAUSED = attrgetter("paused")


def is_quiet(decisions: list[Decision]) -> bool:
    """Whether a cycle may keep these decisions while nothing changes: skips that
    depend only on the workspace's sessions and file."""
    return all(d.decision == "skip" and d.reason in QUIET_REASONS for d in decisions)


class Scanner:
    def __init__(
        self,
        settings: Callable[[], Config],
        *,
        clock: Clock,
        sessions: SessionStore,
        workspace_root: Path,
        user_skills: Path,
        state: Callable[[], HeartbeatState],
        busy: set[str],
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.workspace_root = workspace_root
        self.user_skills = user_skills
        self._state = state
        self.busy = busy  # shared with the service: workspaces whose cycle is running
        self.index = HeartbeatIndex(sessions, workspace_root)
        # quiet workspaces -> their kept decisions (the service's scheduled cycles fill
        # it, one at a time)
        self.quiet: dict[str, list[Decision]] = {}
        self._planned: set[str] = set()  # workspaces planned by the last memo scan
        self._seen: tuple[Any, frozenset[str]] | None = None  # (config, paused) last time
        # changed workspaces not yet planned by a memo scan (None: all of them)
        self._pending: set[str] | None = None
        # one scan at a time: the cycle and the control API (plan/status) use worker threads
        self._lock = threading.RLock()

    @property
    def cfg(self) -> HeartbeatConfig:
        return self.settings().bot.heartbeat

    def now(self) -> datetime:
        return self.clock.now()

    def read_file(self, path: Path | str) -> ParseResult:
        """HEARTBEAT.md parsed (the parser re-reads it only when it changed)."""
        from vikingbot.heartbeat.parser import read_heartbeat

        return read_heartbeat(Path(path), max_bytes=self.cfg.max_file_bytes)

    def workspace_id(self, path: Path) -> str:
        try:
            return path.relative_to(self.workspace_root).as_posix()
        except ValueError:
            return path.name

    def workspace_of(self, key: SessionKey) -> str:
        """Workspace name of a session (pure: no file system access)."""
        from vikingbot.workspace.manager import checked_name

        return checked_name(key, self.settings().bot.sandbox.mode)

    def workspace_path(self, name: str) -> Path:
        return self.workspace_root / name

    def skill_names(self, name: str) -> list[str]:
        """The skills workspace ``name`` sees (its own and the user's)."""
        found = catalog(workspace=self.workspace_path(name), user=self.user_skills)
        return found.names

    # ------------------------------------------------------------ the index

    def watch(self, saved: Callable[[], object] | None = None) -> bool:
        """Learn changes from file system events from now on (the gateway calls this);
        ``saved``: called from the watcher's thread when a HEARTBEAT.md changed."""
        with self._lock:
            return self.index.watch(saved)  # before the first read: no change falls between

    def close(self) -> None:
        with self._lock:
            self.index.close()

    def _refresh(self) -> bool:
        """Update the index; what changed waits for the next memo scan, whoever asked.
        ``True``: the index was filled afresh, every file looked at just now."""
        cfg = self.cfg
        self.index.safety_pass_s = cfg.safety_pass_s
        changed = self.index.refresh(
            self.now(), self.settings().bot.sandbox.mode, cfg.stale_after, cfg.max_file_bytes
        )
        if changed is None:
            self._pending = None
        elif self._pending is not None:
            self._pending |= changed
        return changed is None

    def groups(self) -> tuple[dict[str, list[SessionMeta]], dict[str, datetime | None]]:
        """Sessions by workspace, and until when each workspace has an eligible session."""
        with self._lock:
            self._refresh()
            index = self.index
            return {ws: index.sessions_of(ws) for ws in index.members}, dict(index.until)

    # ------------------------------------------------------------ scans

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
        """Inputs for the planner, and (with ``memo``) the decisions of the quiet
        workspaces kept since they were planned (nothing touched them)."""
        with self._lock:
            return self._scan(only, include_idle=include_idle, memo=memo)

    def _scan(
        self, only: str | None, *, include_idle: bool, memo: bool
    ) -> tuple[list[WorkspaceInput], list[Decision]]:
        self._state().refresh()
        loaded = self._refresh()
        # asked for by hand: an edit the watcher has not reported yet counts (unless every
        # file was just looked at: the first scan of a process, a plan without a gateway)
        if not memo and not loaded:
            rechecked = self.index.recheck_files(self.now())
            if self._pending is not None:
                self._pending |= rechecked
        ws_states = self._state().all_workspaces()
        if memo and only is None:
            changed, self._pending = self._pending, set()
            names, reused = self._changed(changed, ws_states)
        else:
            names, reused = self._everything(only, include_idle), []
        # the planned ones as stored now (on PostgreSQL other gateways write them)
        ws_states = self._state().fresh(names)
        now = self.now()
        inputs = [self._input(name, ws_states.get(name), now) for name in sorted(names)]
        self._attach_entries(inputs)
        return inputs, reused

    def _everything(self, only: str | None, include_idle: bool) -> set[str]:
        if only is not None:
            return {only}
        names = set(self.index.members)
        if include_idle:  # nobody talks to these: shown as no-sessions
            root = self.workspace_root
            if root.is_dir():
                with os.scandir(root) as it:
                    names.update(d.name for d in it if d.is_dir() and not d.name.startswith("."))
        return names

    def _changed(
        self, changed: set[str] | None, ws_states: dict[str, WorkspaceState]
    ) -> tuple[set[str], list[Decision]]:
        """Which workspaces to plan again; the kept decisions of all the others."""
        # the paused ones, picked in C (a generator over 10,000 rows cost 1 ms a cycle)
        paused = frozenset(compress(ws_states, map(_PAUSED, ws_states.values())))
        seen = (self.settings(), paused)
        members = self.index.members
        if changed is None or self._seen is None or seen[0] is not self._seen[0]:
            todo = set(members)  # first cycle, or other settings: everything
        else:
            now = self.now()
            todo = changed | self.index.due(now)
            todo |= seen[1] ^ self._seen[1]
            todo |= {n for n in self._planned if n not in self.quiet}  # did something
            todo |= self.busy
        self._seen = seen
        quiet = self.quiet
        for name in [n for n in todo if n not in members]:
            quiet.pop(name, None)  # no sessions left: nothing to plan
        todo &= members.keys()
        self._planned = todo
        kept = [d for name, mine in quiet.items() if name not in todo for d in mine]
        return todo, kept

    def _input(self, name: str, state: WorkspaceState | None, now: datetime) -> WorkspaceInput:
        until = self.index.until.get(name)
        eligible = until is not None and now <= until
        parsed = self.index.parsed_for(name) if eligible else None
        if parsed is not None and names_skills(parsed):
            parsed = with_skill_problems(parsed, lambda: self.skill_names(name))
        return WorkspaceInput(
            name=name,
            sessions=self.index.sessions_of(name),
            parsed=parsed,
            state=state or WorkspaceState(workspace=name),
            busy=name in self.busy,
            shared=self.index.is_shared(name),
        )

    def _attach_entries(self, inputs: list[WorkspaceInput]) -> None:
        need = [w for w in inputs if w.parsed is not None and not w.parsed.is_empty]
        if not need:
            return
        names = [w.name for w in need] if len(need) <= 2000 else None  # else one full read
        by_ws: dict[str, dict[str, Any]] = defaultdict(dict)
        for (w, k), v in self._state().all_entries(names).items():
            by_ws[w][k] = v
        for wsin in need:
            wsin.entries = by_ws.get(wsin.name, {})
