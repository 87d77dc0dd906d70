"""The heartbeat's view of sessions and HEARTBEAT.md files, kept current by stat.

Per workspace the index holds its sessions (metadata line only: last user message
time, skip flag) and its last parsed HEARTBEAT.md. Each cycle
:meth:`HeartbeatIndex.refresh` returns the workspaces whose sessions or file
changed; only those are planned again.

How a change is found:

- **Sessions**: every known session file is stat-ed and compared with the
  identity it had when it was read (inode, mtime, ctime, size); only a file that
  differs is read again. The sessions folder is listed only when its own identity
  (inode, mtime) differs from the last listing's: creating, renaming or removing a
  file changes the folder, an edit in place changes only the file.
- **HEARTBEAT.md**: the file of each workspace with an eligible session is
  ``lstat``-ed and compared with its identity when it was read.
- **The racy window** (:func:`vikingbot.fsutil.settled`): a file or folder changed
  within the last two seconds may change again without its identity changing,
  so it is looked at again next cycle.
- **The watcher** (:class:`vikingbot.watch.Watcher`, the gateway only) is a
  hint that makes a cycle cheaper: while it runs, a cycle looks only at the paths
  it named. Every ``safety_pass_s`` (an hour), and whenever the watcher died or
  may have lost events, the cycle polls as above.

The shared workspace (sandbox mode ``shared``) is always a member (a new user who
has not chatted yet has standing orders too), and every workspace with standing
orders (:func:`~vikingbot.heartbeat.planner.stands`) has its file looked at whatever
its sessions' age. When a session's last user message grows older than
``stale_after`` its workspace's decisions still change with nobody touching a file
(its checklist stops): those times sit in a priority queue and
:meth:`HeartbeatIndex.due` hands back the workspaces whose time came.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from loguru import logger

from vikingbot.errors import SessionError, WorkspaceError
from vikingbot.fsutil import settled
from vikingbot.heartbeat.duequeue import DueQueue
from vikingbot.heartbeat.parser import read_heartbeat_text
from vikingbot.heartbeat.planner import keeps_workspace_visited, stands
from vikingbot.heartbeat.types import ParseResult
from vikingbot.session import codec
from vikingbot.session.store import SYSTEM_TYPES, SessionStore, is_system_file
from vikingbot.session.types import SessionMeta
from vikingbot.watch import Watcher
from vikingbot.workspace.manager import SHARED_NAME, checked_name

HEARTBEAT_FILE = "HEARTBEAT.md"
SAFETY_PASS_S = 3600.0
# "eligible until" of a workspace with standing orders (see planner.stands): its file is
# read whatever its sessions' age, since its scheduled entries run on their schedule
ALWAYS = datetime.max.replace(tzinfo=UTC)
RENEW_AFTER = 64  # polled workspace folders before the watch is renewed to cover them


class FileId(NamedTuple):
    """What tells one version of a file from another without reading it."""

    ino: int
    mtime_ns: int
    ctime_ns: int
    size: int


def file_id(st: os.stat_result) -> FileId | None:
    """The identity of a stat, or ``None`` while it is in the racy window."""
    if not settled(max(st.st_mtime_ns, st.st_ctime_ns)):
        return None
    return FileId(st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


@dataclass(slots=True)
class _Session:
    seen: FileId | None  # None: read within the racy window, look again
    meta: SessionMeta | None  # None: the metadata line could not be read (logged once)
    workspace: str | None  # None: heartbeat/cron session, or no valid workspace


@dataclass(slots=True)
class _File:
    seen: FileId | int | None  # the identity read, an errno, or None (look again)
    parsed: ParseResult


class _Settings(NamedTuple):
    mode: str  # the sandbox mode (which workspace a session belongs to)
    stale_s: float
    max_bytes: int


class HeartbeatIndex:
    """Sessions by workspace and parsed HEARTBEAT.md files (see the module docstring)."""

    def __init__(
        self, sessions: SessionStore, workspace_root: Path, *, safety_pass_s: float = SAFETY_PASS_S
    ) -> None:
        self.store = sessions
        self.sessions_dir = Path(sessions.sessions_dir)
        self.root = Path(workspace_root)
        # paths joined as plain strings: a pass builds 20,000 of them
        self._dir = f"{self.sessions_dir}{os.sep}"
        self._root = f"{self.root}{os.sep}"
        self.safety_pass_s = safety_pass_s
        self.files: dict[str, _Session] = {}  # session file name -> what it holds
        self.members: dict[str, dict[str, SessionMeta]] = {}  # workspace -> file -> meta
        self.until: dict[str, datetime | None] = {}  # workspace -> eligible until
        self.polled: set[str] = set()  # workspace folders the watch does not cover
        self.watcher: Watcher | None = None
        self._hb: dict[str, _File] = {}  # workspace -> its HEARTBEAT.md as last read
        self._stale = DueQueue()  # workspace -> when its next eligible session goes stale
        self._touched: set[str] = set()  # workspaces whose sessions changed (recompute)
        self._listed: tuple[int, int] | None = None  # sessions folder (ino, mtime) listed
        self._settings: _Settings | None = None
        self._last_full: datetime | None = None
        self._watched: set[str] = set()

    # ------------------------------------------------------------ queries

    def sessions_of(self, workspace: str) -> list[SessionMeta]:
        """The workspace's sessions, most recently updated first (then by key)."""
        metas = list(self.members.get(workspace, {}).values())
        if len(metas) > 1:
            metas.sort(key=lambda m: (m.key.type, m.key.channel_id, m.key.chat_id))
            metas.sort(key=lambda m: m.updated_at, reverse=True)
        return metas

    def heartbeat_path(self, workspace: str) -> str:
        return f"{self._root}{workspace}{os.sep}{HEARTBEAT_FILE}"

    def parsed_for(self, workspace: str) -> ParseResult:
        """The workspace's HEARTBEAT.md as last read (read now if it never was)."""
        found = self._hb.get(workspace)
        if found is None:
            return self._look_at(workspace, None)[1]
        return found.parsed

    def is_shared(self, workspace: str) -> bool:
        """The home's shared workspace (sandbox mode ``shared``): always a member."""
        return workspace == SHARED_NAME and self._shared_mode()

    def _shared_mode(self) -> bool:
        return self._settings is not None and self._settings.mode == "shared"

    def due(self, now: datetime) -> set[str]:
        """Workspaces where a session went stale since the last call."""
        out = self._stale.pop_due(now, inclusive=False)
        for ws in out:
            self._recompute(ws, now)
        return out

    # ------------------------------------------------------------ refresh

    def refresh(self, now: datetime, mode: str, stale_s: float, max_bytes: int) -> set[str] | None:
        """Bring the index up to date; the workspaces whose sessions or file changed.

        ``None`` means everything may have changed (first call, other settings).
        """
        settings = _Settings(mode, float(stale_s), max_bytes)
        if settings != self._settings:
            self._settings = settings
            self._load_all(now)
            return None
        full = self._last_full is None or (now - self._last_full).total_seconds() >= (
            self.safety_pass_s
        )
        events = None if full or self.watcher is None else self.watcher.drain()
        changed = self._poll(now, full=full) if events is None else self._apply(events, now)
        for ws in self.polled:  # folders the watch does not cover: look at them every cycle
            self._hb.pop(ws, None)
        return changed | self.polled

    def recheck_files(self, now: datetime) -> set[str]:
        """Look at every session and eligible HEARTBEAT.md now, whatever the watcher
        has said so far: the workspaces whose sessions or file changed.

        For what a user asks for by hand (``run-now``, ``plan``): a chat or a save a
        moment ago counts now, not when the OS's notification of it is taken."""
        if self._settings is None:
            return set()
        return self._poll(now, full=False)

    def _load_all(self, now: datetime) -> None:
        for table in (self.files, self.members, self.until, self._hb):
            table.clear()
        self._stale.clear()
        self._listed = None
        if self._shared_mode():  # standing orders with no session at all
            self.members.setdefault(SHARED_NAME, {})
            self._touched.add(SHARED_NAME)
        self._poll(now, full=True)

    def _poll(self, now: datetime, *, full: bool) -> set[str]:
        if full:
            self._last_full = now
            if self.watcher is not None and self.polled:
                self._renew_watch()
        changed = self._poll_sessions(relist=full)
        self._settle(now)
        return changed | self._poll_files(now)

    def _settle(self, now: datetime) -> None:
        for ws in self._touched:
            self._recompute(ws, now)
        self._touched.clear()

    def _poll_sessions(self, *, relist: bool) -> set[str]:
        """Each session file stat-ed against what was read; the folder listed again
        when it changed (or ``relist``)."""
        try:
            st = os.stat(self.sessions_dir)
        except OSError:
            st = None
        folder = None if st is None else (st.st_ino, st.st_mtime_ns)
        if not relist and folder is not None and folder == self._listed:
            return self._reload_all(list(self.files))
        names, strays = _session_files(self.sessions_dir)
        if strays:  # system sessions where an older version kept them
            self.store.move_system_sessions()
        changed = self._reload_all(names)
        listed = set(names)
        for name in [n for n in self.files if n not in listed]:
            changed |= self._drop(name)
        # a folder changed within the racy window may change again unseen: list it again
        self._listed = folder if st is not None and settled(st.st_mtime_ns) else None
        return changed

    def _reload_all(self, names: list[str]) -> set[str]:
        changed: set[str] = set()
        for name in names:
            changed |= self._reload(name)
        return changed

    def _poll_files(self, now: datetime) -> set[str]:
        """One ``lstat`` per eligible workspace's HEARTBEAT.md; read again when it changed.
        A workspace that is not eligible lets its parsed file go."""
        changed: set[str] = set()
        for ws, until in self.until.items():
            if until is None or until < now:
                self._hb.pop(ws, None)
                continue
            try:
                st: os.stat_result | int = os.lstat(self.heartbeat_path(ws))
            except OSError as exc:
                st = exc.errno or -1
            old = self._hb.get(ws)
            seen = st if isinstance(st, int) else file_id(st)
            if old is not None and old.seen is not None and old.seen == seen:
                continue
            fresh, parsed = self._look_at(ws, st, seen)
            if old is None or fresh or parsed != old.parsed:
                changed.add(ws)
        return changed

    def _look_at(
        self, ws: str, st: os.stat_result | int | None, seen: FileId | int | None = None
    ) -> tuple[bool, ParseResult]:
        """Read and parse the workspace's file (``st``: its ``lstat`` of a moment ago,
        or the errno it failed with, and ``seen`` its identity); (whether it was unknown,
        what it says)."""
        assert self._settings is not None
        path = self.heartbeat_path(ws)
        if st is None:
            try:
                st = os.lstat(path)
            except OSError as exc:
                st = exc.errno or -1
            seen = st if isinstance(st, int) else file_id(st)
        if isinstance(st, int):
            parsed, _ = read_heartbeat_text(path, max_bytes=self._settings.max_bytes)
        else:
            parsed, _ = read_heartbeat_text(path, max_bytes=self._settings.max_bytes, lstat=st)
        fresh = ws not in self._hb
        self._hb[ws] = _File(seen, parsed)
        return fresh, parsed

    # ------------------------------------------------------------ watcher events

    def _apply(self, paths: set[str], now: datetime) -> set[str]:
        """Changed paths from the watcher: re-read those sessions, mark those workspaces."""
        changed: set[str] = set()
        sessions_dir, root = str(self.sessions_dir), str(self.root)
        for path in paths:
            folder, name = os.path.split(path)
            if folder == sessions_dir:
                if _is_session_file(name):
                    changed |= self._reload(name)
            elif folder == root:  # a workspace folder made, removed or renamed
                changed.add(name)
                self._hb.pop(name, None)
                self.polled.add(name)  # its watch (if any) may be gone: poll until renewed
                self._watched.discard(name)
            elif name == HEARTBEAT_FILE and os.path.dirname(folder) == root:
                ws = os.path.basename(folder)
                changed.add(ws)
                self._hb.pop(ws, None)
        self._settle(now)
        if len(self.polled) >= RENEW_AFTER:
            self._renew_watch()
        return changed

    # ------------------------------------------------------------ sessions

    def _reload(self, name: str) -> set[str]:
        """Stat one session file; read its metadata line again when it changed."""
        path = self._dir + name
        try:
            st = os.stat(path)
        except OSError:
            return self._drop(name)
        seen = file_id(st)
        old = self.files.get(name)
        if old is not None and old.seen is not None and old.seen == seen:
            return set()
        try:
            meta = self.store.read_meta_file(path)
        except SessionError as exc:
            logger.warning("heartbeat: skipping session file: {}", exc)
            meta = None  # remembered with its identity: not read again until it changes
        else:
            if meta is None:  # removed meanwhile
                return self._drop(name)
        if old is not None and old.meta == meta:
            old.seen = seen
            return set()
        changed = self._drop(name)
        ws = None if meta is None else self._workspace(meta)
        self.files[name] = _Session(seen, meta, ws)
        if ws is not None and meta is not None:
            self.members.setdefault(ws, {})[name] = meta
            self._touched.add(ws)
            changed.add(ws)
        return changed

    def _drop(self, name: str) -> set[str]:
        old = self.files.pop(name, None)
        if old is None or old.workspace is None:
            return set()
        group = self.members.get(old.workspace)
        if group is not None:
            group.pop(name, None)
            if not group and not self.is_shared(old.workspace):
                del self.members[old.workspace]
        self._touched.add(old.workspace)
        return {old.workspace}

    def _workspace(self, meta: SessionMeta) -> str | None:
        if meta.key.type in SYSTEM_TYPES:
            return None
        assert self._settings is not None
        try:
            return checked_name(meta.key, self._settings.mode)
        except WorkspaceError as exc:
            logger.warning("heartbeat: session {} has no workspace: {}", meta.key, exc)
            return None

    def _recompute(self, ws: str, now: datetime) -> None:
        """Until when ``ws`` has an eligible session, and when its next one goes stale."""
        assert self._settings is not None
        group = self.members.get(ws)
        if group is None:
            self.until.pop(ws, None)
            self._hb.pop(ws, None)
            self._stale.discard(ws)
            return
        stale = timedelta(seconds=self._settings.stale_s)
        metas = list(group.values())
        until = ALWAYS if stands(self.is_shared(ws), metas) else None
        nxt = None
        for meta in metas:
            if meta.last_user_at is None or not keeps_workspace_visited(meta):
                continue
            t = meta.last_user_at + stale
            if t >= now and (nxt is None or t < nxt):
                nxt = t
        self.until[ws] = until
        if nxt is None:
            self._stale.discard(ws)
        else:
            self._stale.put(ws, nxt)

    # ------------------------------------------------------------ watching

    def watch(self, saved: Callable[[], object] | None = None) -> bool:
        """Start learning changes from the OS (the gateway); ``False``: polling it is.

        ``saved`` is called (from the watcher's thread) as soon as a HEARTBEAT.md or a
        workspace folder changed: the gateway looks at a saved file within seconds.
        Session files are only collected, for the next cycle."""
        self.sessions_dir.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        sessions_dir, root = str(self.sessions_dir), str(self.root)

        def accept(path: str) -> bool:
            folder, name = os.path.split(path)
            if folder == sessions_dir:
                return _is_session_file(name)
            return folder == root or (name == HEARTBEAT_FILE and os.path.dirname(folder) == root)

        def changed(paths: set[str]) -> None:
            if saved is not None and any(os.path.dirname(p) != sessions_dir for p in paths):
                saved()

        # pushed: a saved file is news at once (each step of the watcher's thread costs
        # ~0.1 ms of CPU, watch.py); without ``saved``, pulled once a cycle
        if saved is None:
            self.watcher = Watcher(self._watch_paths(), name="heartbeat", accept=accept, pull=True)
        else:
            self.watcher = Watcher(
                self._watch_paths(), name="heartbeat", accept=accept, on_change=changed
            )
        if not self.watcher.start():
            return False
        self.polled -= self._watched
        if self._settings is not None:  # loaded before the watch: one full pass after it
            self._last_full = None
        return True

    def _watch_paths(self) -> list[Path]:
        try:
            with os.scandir(self.root) as it:
                dirs = {e.name for e in it if e.is_dir() and not e.name.startswith(".")}
        except OSError:
            dirs = set()
        self._watched = dirs
        return [self.sessions_dir, self.root, *(self.root / ws for ws in sorted(self._watched))]

    def _renew_watch(self) -> None:
        if self.watcher is None:
            return
        before = set(self.polled)
        if self.watcher.restart(self._watch_paths()):
            self.polled -= before & self._watched
            self.polled -= {ws for ws in before if ws not in self.members}

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None


def _session_files(folder: Path) -> tuple[list[str], bool]:
    """The user session files in ``folder``, and whether it holds system sessions
    (which belong in ``.system/``)."""
    try:
        with os.scandir(folder) as it:
            names = [e.name for e in it]
    except OSError:
        return [], False
    strays = any(is_system_file(n) for n in names)
    return [n for n in names if _is_session_file(n)], strays


def _is_session_file(name: str) -> bool:
    return not name.startswith(".") and name.endswith(codec.SUFFIX) and not is_system_file(name)
