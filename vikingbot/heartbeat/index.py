"""The heartbeat's view of sessions and HEARTBEAT.md files, kept current cheaply.

Per workspace the index holds its sessions (metadata line only: last user
message time, skip flag) and the last parsed HEARTBEAT.md. A cycle asks
:meth:`HeartbeatIndex.refresh` what changed since the previous cycle and only
those workspaces are planned again; everything else keeps its decisions.

Where the changes come from, cheapest first:

- **events** (:class:`vikingbot.watch.Watcher`, the gateway only): the sessions
  folder, the workspace root and every workspace folder in it are
  watched (not recursively); a changed session file is re-read, a changed
  HEARTBEAT.md or workspace folder marks its workspace. Workspace folders made
  after the watch started are polled until the watch is renewed. The watch is
  put in place before the first full read, so nothing falls between the two.
- **polling** (no watcher, it could not start, or it died): the session
  store's change journal (:meth:`SessionStore.note_changed`) names the session
  files it wrote since the last cycle, and only those are stat-ed and read
  again. Each line also links its write to the sessions folder's ctime before
  and after the rename; while those links chain up to the folder's ctime now,
  the store's writes are all that changed the folder (:meth:`_follow`). When
  they do not (another tool created, replaced or removed a file, a write
  renamed without the store's lock, timestamps here are too coarse to tell),
  every entry in the folder is stat-ed: names and inodes alone cannot show a
  replace, since a freed inode number comes back. Each HEARTBEAT.md of a
  workspace with an eligible session is ``lstat``-ed once and read again only
  when its identity changed.
- **safety pass** (once per ``safety_pass_s``, default an hour, with either of
  the above): every session file is stat-ed and every eligible HEARTBEAT.md
  looked at, for file systems whose notifications do not arrive (NFS, some
  containers) and hand edits in place, which leave the folder's mtime alone.

A restart starts from a **snapshot** (``<data>/heartbeat/index.json``): each
session file's identity (inode, mtime, size) with its metadata line and
workspace, and each HEARTBEAT.md's identity with the text it held. The first
pass still stats every file (files changed while nothing ran are read again),
but reads and parses only what changed; the snapshot is a cache, never trusted
beyond the identities it records, and a broken or foreign one is ignored. It is
written after a first pass that had to read much, after a safety pass that read
something (at most every ``SAVE_EVERY_S``, six hours), and when the index closes.

The shared workspace (sandbox mode ``shared``) is always a member (a new user who has not chatted yet has
standing orders too), and every workspace with standing orders has its file
looked at whatever its sessions' age. When a session's last user message grows
older than ``stale_after`` its workspace's decisions still change with nobody
touching a file (its checklist stops): those times sit in a priority queue and
:meth:`HeartbeatIndex.due` hands back the workspaces whose time came.
"""

from __future__ import annotations

import errno
import gc
import json
import os
import threading
import time
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import count, islice
from pathlib import Path
from typing import Any

from loguru import logger

from vikingbot.errors import SessionError, WorkspaceError
from vikingbot.heartbeat.duequeue import DueQueue
from vikingbot.heartbeat.planner import keeps_workspace_visited, stands
from vikingbot.heartbeat.types import ParseResult
from vikingbot.session import codec
from vikingbot.session.store import SYSTEM_TYPES, JournalLine, SessionStore, journal_line
from vikingbot.session.types import SessionKey, SessionMeta
from vikingbot.watch import Watcher
from vikingbot.workspace.manager import SHARED_NAME

HEARTBEAT_FILE = "HEARTBEAT.md"
_HB_TAIL = os.sep + HEARTBEAT_FILE
SAFETY_PASS_S = 3600.0
# "eligible until" of a workspace with standing orders (see planner.stands): its file is
# read whatever its sessions' age, since its scheduled entries run on their schedule
ALWAYS = datetime.max.replace(tzinfo=UTC)
SETTLE_NS = 2_000_000_000  # a folder mtime is trusted once it is this old
RENEW_AFTER = 64  # polled workspace folders before the watch is renewed to cover them
SNAPSHOT_VERSION = 1
SNAPSHOT_TEXT_BYTES = 4 << 20  # HEARTBEAT.md texts kept in the snapshot, at most
SAVE_AFTER_READS = 200  # a first pass that read this many files writes the snapshot at once
# after a safety pass, the snapshot is written again at most this often (and when the index
# closes): writing 10,000 sessions costs about as much CPU as the pass itself, and a
# snapshot a few hours old costs a start only the reads of what changed since
SAVE_EVERY_S = 6 * 3600.0
FREEZE_AFTER = 2000  # session files from which a full pass's records are frozen (gc.freeze)
# A full pass first times PROBE_STATS lookups of eligible HEARTBEAT.md files; slower
# than COLD_STAT_S each on average, the kernel's inode cache is cold (after a reboot;
# some machines drop it within minutes): each lookup is then two or three random disk
# reads, which WARM_THREADS threads overlap (HeartbeatIndex._warm_up)
PROBE_STATS = 64
COLD_STAT_S = 40e-6
WARM_THREADS = 8
_SYSTEM_PREFIXES = tuple(f"{t}+" for t in SYSTEM_TYPES)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

Ident = tuple[int, int, int]  # inode, mtime_ns, size


class _Journal:
    """Where this reader is in the session store's change journal."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.ino: int | None = None
        self.offset = 0

    def mark(self) -> None:
        """From now on: whatever is appended after this point is news."""
        try:
            st = os.stat(self.path)
        except OSError:
            self.ino, self.offset = 0, 0  # none yet: the first writer creates it
            return
        self.ino, self.offset = st.st_ino, st.st_size

    def read(self) -> list[JournalLine] | None:
        """Lines appended since the last look, in order; ``None`` when some may have
        been missed (the journal was started afresh, removed, or never marked)."""
        if self.ino is None:
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return [] if self.ino == 0 else None
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if st.st_ino != self.ino and not (self.ino == 0 and self.offset == 0):
                return None
            if st.st_size < self.offset:
                return None
            self.ino = st.st_ino
            if st.st_size == self.offset:
                return []
            os.lseek(fd, self.offset, os.SEEK_SET)
            data = os.read(fd, st.st_size - self.offset)
        except OSError:
            return None
        finally:
            os.close(fd)
        end = data.rfind(b"\n") + 1  # a line being written is read next time
        self.offset += end
        return [journal_line(line) for line in data[:end].split(b"\n") if line]


@dataclass(slots=True)
class _Session:
    ident: Ident
    meta: SessionMeta | None  # None: the metadata line could not be read (logged once)
    workspace: str | None  # None: heartbeat/cron session, or no valid workspace


class HeartbeatIndex:
    """Sessions by workspace and parsed HEARTBEAT.md files (see the module docstring)."""

    def __init__(
        self,
        sessions: SessionStore,
        workspace_root: Path,
        *,
        safety_pass_s: float = SAFETY_PASS_S,
        snapshot: Path | None = None,
    ) -> None:
        self.store = sessions
        self.snapshot = snapshot
        self._texts: dict[str, str] = {}  # workspace -> HEARTBEAT.md text as last read
        self._reads = 0  # files read since the snapshot was written
        # the snapshot is worth writing (after a pass that read much); the owner calls
        # save() once the cycle's work is under way, so a first cycle does not wait for it
        self.save_due = False
        # when a save was last asked for (a first pass that read much, or a safety pass)
        self._save_asked: datetime | None = None
        self.sessions_dir = Path(sessions.sessions_dir)
        self.root = Path(workspace_root)
        self._root_s = str(self.root)
        self._sessions_s = str(self.sessions_dir)
        self.safety_pass_s = safety_pass_s
        self.files: dict[str, _Session] = {}  # session file name -> what it holds
        self.members: dict[str, dict[str, SessionMeta]] = {}  # workspace -> file -> meta
        self.until: dict[str, datetime | None] = {}  # workspace -> eligible until
        self.parsed: dict[str, ParseResult] = {}  # workspace -> last read HEARTBEAT.md
        self.polled: set[str] = set()  # workspace folders the watch does not cover
        self.watcher: Watcher | None = None
        self._hb_paths: dict[str, str] = {}
        self._root = _RootFolder(self._root_s)
        self._hb_idents: dict[str, Any] = {}  # workspace -> HEARTBEAT.md identity when read
        # what the polling loop needs of each workspace with sessions, in one record (a
        # list: [eligible until, inode, ctime_ns, "<ws>/HEARTBEAT.md", ws, its place in
        # _eligible]; inode -1 when the file is not known settled)
        self._polls: dict[str, list[Any]] = {}
        # the records eligible at _eligible_at, good until _eligible_min (see _moved);
        # None: make it again from _polls
        self._eligible: _Eligible | None = None
        self._eligible_min: datetime | None = None
        self._eligible_at: datetime | None = None
        self._stale = DueQueue()  # workspace -> when its next eligible session goes stale
        self._touched: set[str] = set()  # workspaces whose sessions changed (recompute)
        self._dir_sig: tuple[int, int] | None = None
        self._racy: set[str] = set()  # session files read within SETTLE_NS of a write
        self._journal = _Journal(sessions.journal_path)
        self.fine_ctimes: bool | None = None  # see _fine_ctimes; found out on first use
        self._settings: tuple[str, float, int] | None = None
        self._last_full: datetime | None = None
        self._watched: set[str] = set()
        self.full_passes = 0  # how many times every file was looked at (for tests/benches)
        self.folder_passes = 0  # how many times every session entry was stat-ed (the same)
        self.looked = 0  # files whose lstat differed from their record (for tests)
        # the cold inode cache probe of full passes (_warm_up), and how often it said cold
        self.probe_stats, self.cold_stat_s = PROBE_STATS, COLD_STAT_S
        self.warm_ups = 0

    # ------------------------------------------------------------ queries

    def sessions_of(self, workspace: str) -> list[SessionMeta]:
        """The workspace's sessions, most recently updated first (then by key)."""
        metas = list(self.members.get(workspace, {}).values())
        if len(metas) < 2:
            return metas
        metas.sort(key=lambda m: (m.key.type, m.key.channel_id, m.key.chat_id))
        metas.sort(key=lambda m: m.updated_at, reverse=True)
        return metas

    def heartbeat_path(self, workspace: str) -> str:
        path = self._hb_paths.get(workspace)
        if path is None:
            path = self._hb_paths[workspace] = f"{self._root_s}{os.sep}{workspace}{_HB_TAIL}"
        return path

    def parsed_for(self, workspace: str) -> ParseResult:
        """The workspace's HEARTBEAT.md as last read (read now if it never was)."""
        found = self.parsed.get(workspace)
        if found is None:
            found = self.parsed[workspace] = self._read(workspace)
        return found

    def is_shared(self, workspace: str) -> bool:
        """The home's shared workspace (sandbox mode ``shared``): always a member."""
        return workspace == SHARED_NAME and self._shared_mode()

    def _shared_mode(self) -> bool:
        return self._settings is not None and self._settings[0] == "shared"

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
        settings = (mode, float(stale_s), max_bytes)
        if settings != self._settings:
            self._settings = settings
            self._load_all(now)
            return None
        full = self._last_full is None or (now - self._last_full).total_seconds() >= (
            self.safety_pass_s
        )
        events = None if full or self.watcher is None else self.watcher.drain()
        changed = self._poll(now, full=full) if events is None else self._apply(events, now)
        if full and self._reads:
            asked = self._save_asked
            if asked is None or (now - asked).total_seconds() >= SAVE_EVERY_S:
                self.save_due, self._save_asked = True, now
        for ws in self.polled:  # folders the watch does not cover: look at them every cycle
            self._forget_file(ws)
        changed |= self.polled
        return changed

    def recheck_files(self, now: datetime) -> set[str]:
        """Read the sessions the store's change journal names since the last look, then
        look at every eligible HEARTBEAT.md now (one ``lstat`` each), whatever the
        watcher has said so far: the workspaces whose sessions or file changed.

        For what a user asks for by hand (``run-now``, ``plan``): the watcher's events
        are taken at the next cycle, and a chat a moment ago or a file saved a moment
        ago must count now (and not wait on the OS's notification of it). The
        watcher's later events for the same files find them unchanged.
        """
        if self._settings is None:
            return set()
        changed: set[str] = set()
        if self.watcher is not None:  # polling reads the journal each cycle anyway
            changed = self._reload_named(name for name, _ in self._journal.read() or ())
            self._settle(now)
        return changed | self._poll_files(now)

    def _load_all(self, now: datetime) -> None:
        self.store.move_system_sessions()
        self.files.clear()
        self.members.clear()
        self.until.clear()
        self._polls.clear()
        self._eligible = None
        self.parsed.clear()
        self._hb_idents.clear()
        self._texts.clear()
        self._stale.clear()
        self._dir_sig = None
        self._racy.clear()
        with _gc_paused(freeze=lambda: len(self.files) >= FREEZE_AFTER):
            self._restore()
            if self._shared_mode():  # standing orders with no session at all
                self.members.setdefault(SHARED_NAME, {})
                self._touched.add(SHARED_NAME)
            self._reads = 0
            self._poll(now, full=True)
        if self._reads >= SAVE_AFTER_READS:
            # the safety passes of the next hours then add nothing worth a new snapshot
            self.save_due, self._save_asked = True, now

    # ------------------------------------------------------------ snapshot

    def save(self) -> None:
        """Write the snapshot (atomically; a failure is logged, nothing else)."""
        self.save_due = False
        if self.snapshot is None or self._settings is None:
            return
        sessions = []
        for name, rec in self.files.items():
            meta = rec.meta
            if meta is None or rec.ident[0] < 0:  # unreadable, or read too soon after a write
                continue
            key = meta.key
            sessions.append(
                [
                    name,
                    *rec.ident,
                    key.type,
                    key.channel_id,
                    key.chat_id,
                    codec.dump_dt(meta.created_at),
                    codec.dump_dt(meta.updated_at),
                    codec.dump_dt(meta.last_user_at),
                    meta.metadata,
                    rec.workspace,
                ]
            )
        texts: dict[str, int] = {}
        budget = SNAPSHOT_TEXT_BYTES
        files = []
        for ws, ident in self._hb_idents.items():
            if ident is None:
                continue
            if isinstance(ident, int):  # no file (or an error): the errno
                files.append([ws, ident, None])
                continue
            text = self._texts.get(ws)
            if text is None:
                continue
            at = texts.get(text)
            if at is None:
                if len(text) > budget:
                    continue
                budget -= len(text)
                at = texts[text] = len(texts)
            files.append([ws, list(ident), at])
        doc = {
            "version": SNAPSHOT_VERSION,
            "settings": list(self._settings),
            "sessions_dir": self._sessions_s,
            "root": self._root_s,
            "sessions": sessions,
            "texts": list(texts),
            "files": files,
        }
        path = self.snapshot
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = json.dumps(doc, separators=(",", ":")).encode("utf-8", "surrogateescape")
            # private like the session files it mirrors (their metadata lines are in it)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except (OSError, ValueError) as exc:
            logger.warning("heartbeat: index snapshot not written to {}: {}", path, exc)
            tmp.unlink(missing_ok=True)
            return
        self._reads = 0

    def _restore(self) -> None:
        """Fill the index from the snapshot; the full pass after it checks every entry."""
        if self.snapshot is None:
            return
        try:
            doc = json.loads(self.snapshot.read_bytes())
            if not (
                isinstance(doc, dict)
                and doc.get("version") == SNAPSHOT_VERSION
                and doc.get("settings") == list(self._settings or ())
                and doc.get("sessions_dir") == self._sessions_s
                and doc.get("root") == self._root_s
            ):
                return
            files = {}
            for row in doc["sessions"]:
                name, ino, mtime, size, typ, chan, chat, created, updated, last, md, ws = row
                last_at = datetime.fromisoformat(last) if last is not None else None
                if not isinstance(md, dict) or not isinstance(ws, str | None):
                    raise ValueError(f"session {name!r}: bad metadata or workspace")
                meta = SessionMeta(
                    SessionKey(typ, chan, chat),
                    datetime.fromisoformat(created),
                    datetime.fromisoformat(updated),
                    last_at,
                    md,
                )
                files[str(name)] = _Session((int(ino), int(mtime), int(size)), meta, ws)
            texts = [str(t) for t in doc["texts"]]
            idents: dict[str, Any] = {}
            known: dict[str, str] = {}
            for ws, ident, at in doc["files"]:
                if isinstance(ident, int):
                    idents[str(ws)] = ident
                else:
                    idents[str(ws)] = (int(ident[0]), int(ident[1]), int(ident[2]))
                    known[str(ws)] = texts[at]
        except FileNotFoundError:
            return
        except Exception as exc:  # a cache: whatever is wrong with it, read the files instead
            logger.info("heartbeat: index snapshot {} ignored: {}", self.snapshot, exc)
            return
        from vikingbot.heartbeat.parser import parse_heartbeat

        self.files.update(files)
        for name, rec in files.items():
            if rec.workspace is not None and rec.meta is not None:
                self.members.setdefault(rec.workspace, {})[name] = rec.meta
                self._touched.add(rec.workspace)
        missing = ParseResult(missing=True)
        for ws, ident in idents.items():
            self._hb_idents[ws] = ident
            text = known.get(ws)
            if text is not None:
                self._texts[ws] = text
                self.parsed[ws] = parse_heartbeat(text)
            elif ident == errno.ENOENT:
                self.parsed[ws] = missing
            else:
                self._hb_idents[ws] = None

    def _poll(self, now: datetime, *, full: bool) -> set[str]:
        if full:
            self._last_full = now
            self.full_passes += 1
            if self.watcher is not None and self.polled:
                self._renew_watch()
        changed = self._poll_sessions(full)
        self._settle(now)
        changed |= self._poll_files(now, probe=full)
        return changed

    def _settle(self, now: datetime) -> None:
        for ws in self._touched:
            self._recompute(ws, now)
        self._touched.clear()

    def _poll_sessions(self, full: bool) -> set[str]:
        """The sessions the journal names read again, when the store's writes are all
        that changed the sessions folder since it was last looked at (:meth:`_follow`);
        else (and on full passes) every entry stat-ed: another tool may have created,
        replaced or removed a file too.

        Names and inodes alone (``scandir`` without a stat) cannot show a replace: the
        file system hands a freed inode number out again at once (ext4 does), so a file
        another tool replaced twice between cycles can come back with the inode it had.
        Its mtime or size tells (and its ctime, which the identity does not hold
        yet); only a stat gives them.
        """
        news = None if full else self._journal.read()
        names = None if news is None else self._follow(news)
        if names is not None:  # racy: read too soon after a write, read again
            return self._reload_named(names | self._racy)
        self._journal.mark()  # before the listing: a write during it is seen next time
        # listed through an open folder: each entry's stat is then relative to it
        # (fstatat), not a walk of the whole absolute path (~20% of the full pass)
        with _open_folder(self._sessions_s) as folder:
            return self._poll_all_sessions(folder)

    def _reload_named(self, names: Iterable[str]) -> set[str]:
        """Each of ``names`` that is a user session's file stat-ed and read again if it
        changed; the workspaces whose sessions changed."""
        changed: set[str] = set()
        for name in names:
            if _is_session_file(name):
                changed |= self._reload(name, None)
        return changed

    def _follow(self, news: list[JournalLine]) -> set[str] | None:
        """The names in ``news`` when the store's own writes are all that changed the
        sessions folder since its ctime was last trusted, else ``None``.

        Each write's link is the folder's ctime just before and just after its rename
        (the store makes its temp files in a subfolder, so the rename is its one
        change to the folder). The chain holds when the first link starts at the
        ctime recorded then, each further one where the one before ended, and the
        last ends at the folder's ctime now. Another tool's create, replace, remove
        or utime moves the ctime between links (on Linux 6.13 and later a change
        right after a stat always gets a new timestamp), and so do a write that
        renamed without the store's lock and a line without a link: the chain
        breaks. What it cannot see is another tool's change in the microseconds
        between a write's rename and the stat next to it, and an edit in place (the
        folder does not change): the hourly safety pass does. Where timestamps are
        coarse (older kernels, some file systems: a change in the same tick as the
        last stat keeps the time) or ctime is something else (Windows: the creation
        time), the chain proves nothing and is never trusted (:func:`_fine_ctimes`).
        """
        sig = self._dir_sig
        if sig is None:
            return None
        if news:  # (an unchanged folder is trusted anyway, as a listing's is)
            if self.fine_ctimes is None:
                self.fine_ctimes = _fine_ctimes(self._journal.path)
            if not self.fine_ctimes:
                return None
        try:
            st = os.stat(self._sessions_s)
        except OSError:
            return None
        ctime = sig[1]
        for _, link in news:
            if link is None or link[0] != ctime:
                return None
            ctime = link[1]
        if (st.st_ino, st.st_ctime_ns) != (sig[0], ctime):
            return None
        if ctime != sig[1]:  # trusted as a listing's is: once it is settled
            settled = time.time_ns() - ctime > SETTLE_NS
            self._dir_sig = (st.st_ino, ctime) if settled else None
        return {name for name, _ in news}

    def _poll_all_sessions(self, folder: int | str) -> set[str]:
        self.folder_passes += 1
        try:
            st = os.fstat(folder) if isinstance(folder, int) else os.stat(folder)
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            entries = []
        else:
            # the folder's ctime: nobody can set it back (a tool restoring the mtime
            # still moves it); the journal's links are ctimes too (see _follow)
            settled = time.time_ns() - st.st_ctime_ns > SETTLE_NS
            self._dir_sig = (st.st_ino, st.st_ctime_ns) if settled else None
        listed = {e.name for e in entries}
        changed: set[str] = set()
        files, suffix, system = self.files, codec.SUFFIX, _SYSTEM_PREFIXES
        for entry in entries:  # the common case inline: one stat, nothing changed
            name = entry.name
            if name[0] == "." or not name.endswith(suffix) or name.startswith(system):
                continue
            old = files.get(name)
            if old is not None and old.ident == _ident(entry):
                continue
            changed |= self._reload(name, entry)
        for name in [n for n in files if n not in listed]:
            changed |= self._drop(name)
        return changed

    def _poll_files(self, now: datetime, *, probe: bool = False) -> set[str]:
        """One ``lstat`` per eligible workspace's file; read again only when it changed.

        The loop is the polling fallback's hot path (10,000 files): one syscall and
        two integers compared per file, nothing else. The path is looked up from
        the workspace root's open folder (two components, not the whole absolute path).
        The eligible files are kept in a list between cycles (:meth:`_moved` keeps it
        true), so a cycle does not sort the eligible from the stale again; the pass
        over every record (:meth:`_poll_every_file`) runs when that list may be out of
        date. ``probe`` (full passes): when a few timed lookups say the inode cache is
        cold, threads fill it first (:meth:`_warm_up`).
        """
        root = self._root.open()  # None: absolute paths
        settled_before = time.time_ns() - SETTLE_NS
        if probe:
            self._warm_up(now)
        eligible, low, at = self._eligible, self._eligible_min, self._eligible_at
        if (
            probe
            or root is None
            or eligible is None
            or at is None
            or now < at
            or (low is not None and now > low)
        ):
            return self._poll_every_file(now, root, settled_before)
        lstat = os.lstat
        seen: list[tuple[int, os.stat_result | OSError]] = []
        # the records themselves are not touched here (a reference to each would be a
        # write to its memory): only the flat copies, and the record of a file that
        # differs
        for i, path, ino, ctime in zip(count(), eligible.paths, eligible.inos, eligible.ctimes):
            try:
                st = lstat(path, dir_fd=root)
            except OSError as exc:
                seen.append((i, exc))
                continue
            # the same inode, not changed since it was read: every write, rename and
            # utime moves ctime
            if st.st_ctime_ns == ctime and st.st_ino == ino:
                continue
            seen.append((i, st))
        changed: set[str] = set()
        recs = eligible.recs
        for i, found in seen:
            self._look_at(recs[i], found, settled_before, changed)
        return changed

    def _poll_every_file(self, now: datetime, root: int | None, settled_before: int) -> set[str]:
        """:meth:`_poll_files` over every record, sorting the eligible from the stale
        (whose parsed files are let go) and keeping the eligible ones' list."""
        changed: set[str] = set()
        parsed, idents, lstat = self.parsed, self._hb_idents, os.lstat
        eligible: list[list[Any]] = []
        low: datetime | None = None
        for ws, rec in self._polls.items():
            until = rec[0]
            if until is None or until < now:
                if parsed.pop(ws, None) is not None:
                    idents.pop(ws, None)
                    rec[1] = -1
                continue
            eligible.append(rec)
            if low is None or until < low:
                low = until
            found: os.stat_result | OSError
            try:
                found = lstat(rec[3] if root is not None else self.heartbeat_path(ws), dir_fd=root)
            except OSError as exc:
                found = exc
            else:
                if found.st_ctime_ns == rec[2] and found.st_ino == rec[1]:
                    continue
            self._look_at(rec, found, settled_before, changed)
        # the loop's list is only for the relative lookups (an identity too big for the
        # arrays, on some platform, leaves it unmade: every cycle then takes this pass)
        made = _Eligible.make(eligible) if root is not None else None
        self._eligible, self._eligible_min, self._eligible_at = made, low, now
        return changed

    def _look_at(
        self,
        rec: list[Any],
        found: os.stat_result | OSError,
        settled_before: int,
        changed: set[str],
    ) -> None:
        """A file whose ``lstat`` differs from what was read: read it again when its
        identity changed (``changed`` gets the workspace when what it says did)."""
        ws = rec[4]
        self.looked += 1
        parsed, idents = self.parsed, self._hb_idents
        st: os.stat_result | None
        ident: Any
        if isinstance(found, OSError):
            ident, settled, st = found.errno, True, None
        else:
            st = found
            ident = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
            settled = ident[1] < settled_before and ident[2] < settled_before
        # unsettled: a second write could keep this identity, so look again next time
        if st is not None and settled:
            rec[1], rec[2] = ident[0], ident[2]
        else:
            rec[1] = -1
        self._sync(rec)
        old = parsed.get(ws)
        if old is not None and idents.get(ws) == ident:
            return
        idents[ws] = ident if settled else None
        new = parsed[ws] = self._read(ws, st)
        if old is None or (new is not old and new != old):
            changed.add(ws)

    def _moved(self, old: datetime | None, new: datetime | None) -> None:
        """A workspace's eligible-until time moved from ``old`` to ``new`` (``None``:
        no record): keep the polling loop's list of eligible files true.

        The list holds the records eligible when it was made (``until`` at or after
        that time); it stays good up to the earliest ``until`` in it. A record that
        joins or leaves it drops the list, and the next cycle makes it again.
        """
        at = self._eligible_at
        if self._eligible is None or at is None:
            return
        was = old is not None and old >= at
        now_in = new is not None and new >= at
        if was != now_in:
            self._eligible = None
        elif (
            now_in and new is not None and (self._eligible_min is None or new < self._eligible_min)
        ):
            self._eligible_min = new

    def _warm_up(self, now: datetime) -> None:
        """When the inode cache is cold, look the eligible HEARTBEAT.md files up from
        ``WARM_THREADS`` threads first (results thrown away), so the loop finds them
        cached.

        Cold (after a reboot; some machines drop the cache within minutes), each
        lookup of a file in its own folder is two or three random disk reads that
        wait with the GIL released: the threads' waits overlap (10,000 files: 1.3 s
        one at a time, about 0.3 s from eight threads here, then 40 ms for the loop).
        Warm, threads would only cost: ``probe_stats`` timed lookups decide.
        """
        probe = self.probe_stats
        if len(self._polls) < 4 * probe:
            return
        eligible = (
            self.heartbeat_path(ws)
            for ws, rec in self._polls.items()
            if rec[0] is not None and rec[0] >= now
        )
        sample = list(islice(eligible, probe))
        started = time.perf_counter()
        _look_up(sample)
        if time.perf_counter() - started <= len(sample) * self.cold_stat_s:
            return
        rest = list(eligible)
        self.warm_ups += 1
        logger.debug(
            "heartbeat: inode cache cold: looking up {} HEARTBEAT.md files from {} threads",
            len(rest),
            WARM_THREADS,
        )
        threads = [
            threading.Thread(target=_look_up, args=(rest[i::WARM_THREADS],), daemon=True)
            for i in range(WARM_THREADS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _forget_file(self, ws: str) -> None:
        """Read the workspace's HEARTBEAT.md again when it is next needed."""
        self.parsed.pop(ws, None)
        self._hb_idents.pop(ws, None)
        rec = self._polls.get(ws)
        if rec is not None:
            rec[1] = -1
            self._sync(rec)

    def _sync(self, rec: list[Any]) -> None:
        """A record's inode or ctime changed: so does the loop's copy, if it has one."""
        if self._eligible is not None and not self._eligible.sync(rec):
            self._eligible = None

    def _apply(self, paths: set[str], now: datetime) -> set[str]:
        """Changed paths from the watcher: re-read those sessions, mark those workspaces."""
        changed: set[str] = set()
        sessions_dir = str(self.sessions_dir)
        root = str(self.root)
        for path in paths:
            folder, name = os.path.split(path)
            if folder == sessions_dir:
                if _is_session_file(name):
                    changed |= self._reload(name, None)
            elif folder == root:  # a workspace folder made, removed or renamed
                changed.add(name)
                self._forget_file(name)
                self.polled.add(name)  # its watch (if any) may be gone: poll until renewed
                self._watched.discard(name)
            elif name == HEARTBEAT_FILE and os.path.dirname(folder) == root:
                ws = os.path.basename(folder)
                changed.add(ws)
                self._forget_file(ws)
        self._settle(now)
        if len(self.polled) >= RENEW_AFTER:
            self._renew_watch()
        return changed

    # ------------------------------------------------------------ sessions

    def _reload(self, name: str, entry: os.DirEntry[str] | None) -> set[str]:
        path = os.path.join(self._sessions_s, name)
        try:
            st = entry.stat() if entry is not None else os.stat(path)
        except OSError:
            return self._drop(name)
        ident = (st.st_ino, st.st_mtime_ns, st.st_size)
        if time.time_ns() - st.st_mtime_ns < SETTLE_NS:
            # written within the timestamp granularity: another write could keep this
            # identity (git's "racy clean" rule), so it is read again next time
            ident = (-1, st.st_mtime_ns, st.st_size)
        old = self.files.get(name)
        if old is not None and old.ident == ident:
            return set()
        self._reads += 1
        try:
            meta = self.store.read_meta_file(path)
        except SessionError as exc:
            logger.warning("heartbeat: skipping session file: {}", exc)
            meta = None  # remembered with its identity: not read again until it changes
        else:
            if meta is None:  # removed meanwhile
                return self._drop(name)
        changed = self._drop(name)
        if meta is None:
            ws = None
        elif old is not None and old.meta is not None and old.meta.key == meta.key:
            ws = old.workspace  # the same session, the same folder (a digest less per write)
        else:
            ws = self._workspace(meta)
        self.files[name] = _Session(ident, meta, ws)
        if ident[0] < 0:
            self._racy.add(name)
        if ws is not None and meta is not None:
            self.members.setdefault(ws, {})[name] = meta
            self._touched.add(ws)
            changed.add(ws)
        return changed

    def _drop(self, name: str) -> set[str]:
        self._racy.discard(name)
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
        from vikingbot.workspace.manager import checked_name

        if meta.key.type in SYSTEM_TYPES:
            return None
        assert self._settings is not None
        try:
            return checked_name(meta.key, self._settings[0])
        except WorkspaceError as exc:
            logger.warning("heartbeat: session {} has no workspace: {}", meta.key, exc)
            return None

    def _recompute(self, ws: str, now: datetime) -> None:
        """Until when ``ws`` has an eligible session, and when its next one goes stale."""
        assert self._settings is not None
        group = self.members.get(ws)
        if group is None:
            self.until.pop(ws, None)
            gone = self._polls.pop(ws, None)
            if gone is not None:
                self._moved(gone[0], None)
            self._forget_file(ws)
            self._stale.discard(ws)
            return
        stale = timedelta(seconds=self._settings[1])
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
        rec = self._polls.get(ws)
        if rec is None:
            self._polls[ws] = [until, -1, -1, f"{ws}{_HB_TAIL}", ws, -1]
            self._moved(None, until)
        elif rec[0] != until:
            self._moved(rec[0], until)
            rec[0] = until
        if nxt is None:
            self._stale.discard(ws)
        else:
            self._stale.put(ws, nxt)

    def _read(self, ws: str, lstat: os.stat_result | None = None) -> ParseResult:
        """Read and parse the workspace's file (``lstat``: what the caller just saw)."""
        from vikingbot.heartbeat.parser import read_heartbeat_text

        assert self._settings is not None
        self._reads += 1
        result, text = read_heartbeat_text(
            self.heartbeat_path(ws), max_bytes=self._settings[2], lstat=lstat
        )
        if text is None:
            self._texts.pop(ws, None)
        else:
            self._texts[ws] = text
        return result

    # ------------------------------------------------------------ watching

    def watch(self) -> bool:
        """Start learning changes from the OS (the gateway); ``False``: polling it is."""
        self.sessions_dir.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        sessions_dir = str(self.sessions_dir)
        root = str(self.root)

        def accept(path: str) -> bool:
            folder, name = os.path.split(path)
            if folder == sessions_dir:
                return _is_session_file(name)
            return folder == root or (name == HEARTBEAT_FILE and os.path.dirname(folder) == root)

        # pulled: the events are needed once a cycle, minutes apart, and a thread of
        # ours would wake every step all day to hand them over (watch.py)
        self.watcher = Watcher(self._watch_paths(), name="heartbeat", accept=accept, pull=True)
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
        if self._reads:
            self.save()
        self._root.close()


class _Eligible:
    """The polling loop's list of eligible records, with what it compares kept flat:
    the paths in a list, inodes and ctimes in two arrays.

    After minutes of quiet, fetching two integer objects per record from memory cost
    the loop a tenth of its time (10,000 files: ~2 ms); arrays hold the values
    side by side. A record's place is kept in the record (``rec[5]``), so a change to
    its inode or ctime reaches the copy here (:meth:`sync`). Inode 0 with ctime -1:
    look at the file whatever ``lstat`` says (not known settled).
    """

    __slots__ = ("ctimes", "inos", "paths", "recs")

    def __init__(self, recs: list[list[Any]]) -> None:
        self.recs = recs
        self.paths: list[str] = [rec[3] for rec in recs]
        self.inos = array("Q", bytes(8 * len(recs)))
        self.ctimes = array("q", bytes(8 * len(recs)))
        for i, rec in enumerate(recs):
            rec[5] = i
            self._copy(i, rec)

    @classmethod
    def make(cls, recs: list[list[Any]]) -> _Eligible | None:
        try:
            return cls(recs)
        except OverflowError:  # an identity the arrays cannot hold (not on Linux or macOS)
            return None

    def _copy(self, i: int, rec: list[Any]) -> None:
        if rec[1] < 0:
            self.inos[i], self.ctimes[i] = 0, -1
        else:
            self.inos[i], self.ctimes[i] = rec[1], rec[2]

    def sync(self, rec: list[Any]) -> bool:
        """Copy ``rec``'s identity if it is in this list; ``False``: it could not be
        held (the list must be made again)."""
        i = rec[5]
        if 0 <= i < len(self.recs) and self.recs[i] is rec:
            try:
                self._copy(i, rec)
            except OverflowError:
                return False
        return True


def _fine_ctimes(journal: str) -> bool:
    """Whether a change made right after a stat always gets a new ctime on the file
    system the journal (and so the sessions folder) is on: Linux 6.13 and later give
    one (multigrain timestamps), as do file systems with a nanosecond clock. Three
    writes to a probe file beside the journal, each after a stat: a coarse clock
    (ticks of 1-10 ms) gives two equal times at once, and so does a ctime that is a
    creation time (Windows). ``False`` when it cannot tell."""
    probe = os.path.join(os.path.dirname(journal), ".ctime-probe")
    try:
        os.makedirs(os.path.dirname(journal), exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        last = os.fstat(fd).st_ctime_ns
        for _ in range(3):
            os.write(fd, b".")
            now = os.fstat(fd).st_ctime_ns
            if now == last:
                return False
            last = now
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        with suppress(OSError):
            os.unlink(probe)


def _look_up(paths: list[str]) -> None:
    """``lstat`` each path, results thrown away (the kernel's inode cache filled)."""
    for path in paths:
        with suppress(OSError):
            os.lstat(path)


class _RootFolder:
    """The workspace root held open, so each HEARTBEAT.md is looked up relative to it.

    Checked on every use (one ``stat`` of the root's path): a root that was replaced
    or renamed since it was opened is opened again, a missing one gives ``None``
    (absolute paths then, which fail as the files are gone). ``None`` too where the
    platform has no ``dir_fd`` for ``lstat``.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self._id: tuple[int, int] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def open(self) -> int | None:
        if os.stat not in os.supports_dir_fd:  # lstat is stat without following links
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            self.close()
            return None
        if self.fd is not None and self._id == (st.st_dev, st.st_ino):
            return self.fd
        self.close()
        try:
            fd = os.open(self.path, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        except OSError:
            return None
        try:
            held = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None
        self.fd, self._id = fd, (held.st_dev, held.st_ino)
        self._finalizer = weakref.finalize(self, os.close, fd)
        return fd

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # closes the fd, once
        self.fd = self._id = self._finalizer = None


@contextmanager
def _open_folder(path: str) -> Iterator[int | str]:
    """``path`` held open as a folder where ``scandir`` takes one (each entry's stat is
    then relative to it, and no entry carries a joined path); else the path itself."""
    folder: int | str = path
    with suppress(OSError):
        if os.scandir in os.supports_fd:
            folder = os.open(path, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    try:
        yield folder
    finally:
        if isinstance(folder, int):
            os.close(folder)


@contextmanager
def _gc_paused(freeze: Callable[[], bool]) -> Iterator[None]:
    """No cyclic garbage collection while a full pass builds thousands of long-lived
    records: each collection would walk all of them again, for nothing (a fifth of a
    10,000-session first pass went there).

    When ``freeze()`` says the index is big, what is alive afterwards is moved out of
    the collector's sight (``gc.freeze``): the index lives as long as the process,
    and each later full collection would walk it again too (another 0.3 s of the
    first cycle). Its records hold no reference cycles, so those dropped later are
    still freed at once; only cyclic garbage left at that moment is kept for good.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze():
            gc.freeze()
        if was:
            gc.enable()


def _ident(entry: os.DirEntry[str]) -> Ident | None:
    try:
        st = entry.stat()
    except OSError:
        return None  # gone: _reload drops it
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _is_session_file(name: str) -> bool:
    return (
        name.endswith(codec.SUFFIX)
        and not name.startswith(".")
        and not name.startswith(_SYSTEM_PREFIXES)
    )
