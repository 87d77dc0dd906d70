"""The session store: one JSONL file per conversation under ``<data>/sessions/``.

Owns reading and writing session files (format in :mod:`vikingbot.session.codec`).
Heartbeat, cron and doctor sessions (:data:`SYSTEM_TYPES`) live apart, in
``<sessions>/.system/``: they are written on every unattended turn, and the
user's folder changes only when the user's conversations do (the heartbeat
watches that folder). Files of those types left in the main folder by an older
version are moved there once, on first use.

Every write goes to a temp file beside the session file (a dot-name, which no
listing takes for a session), is fsynced and then moved over the old file with
``os.replace``, under an OS file lock per session (``<sessions>/.locks/<name>.lock``)
so the CLI and the gateway never clobber each other. Readers take no lock: they
always see a whole old file or a whole new one. A line that cannot be parsed raises
:class:`SessionError` naming file and line; the store never rewrites a file whose
metadata line it could not parse, and copies message lines it does not need to read
byte for byte.

:meth:`SessionStore.list_sessions` keeps each file's metadata with its identity
(inode, mtime, size) and reads a file again only when that changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from loguru import logger

from vikingbot.clock import Clock, SystemClock
from vikingbot.errors import SessionError
from vikingbot.fsutil import fsync_dir, settled
from vikingbot.session import codec
from vikingbot.session.types import DOCTOR, Message, SessionKey, SessionMeta

# not the user's conversations: no listing shows them, the heartbeat never counts them
SYSTEM_TYPES = frozenset({"heartbeat", "cron", DOCTOR, "subagent"})
# `doctor --live`'s session before it had a type of its own (cli:doctor:doctor): moved too
OLD_SYSTEM_FILES = frozenset({"cli+doctor+doctor.jsonl"})
_SYSTEM_PREFIXES = tuple(f"{t}+" for t in SYSTEM_TYPES)
SYSTEM_DIR = ".system"

if TYPE_CHECKING:
    import asyncio

    from filelock import FileLock

KeyLike = SessionKey | str


class SessionStore:
    """Sessions on disk. Methods are synchronous and safe across processes."""

    def __init__(
        self, sessions_dir: Path, clock: Clock | None = None, *, lock_timeout: float = 30.0
    ) -> None:
        self.sessions_dir = Path(sessions_dir)
        self.clock: Clock = clock or SystemClock()
        self.lock_timeout = lock_timeout
        self._file_locks: dict[str, FileLock] = {}
        self._turn_locks: dict[SessionKey, asyncio.Lock] = {}
        self._meta_cache: dict[str, tuple[tuple[int, int, int], SessionMeta]] = {}
        self._system_moved = False

    @property
    def system_dir(self) -> Path:
        """Where heartbeat and cron sessions live (not among the user's sessions)."""
        return self.sessions_dir / SYSTEM_DIR

    # ----------------------------------------------------------------- paths

    def path_for(self, key: KeyLike) -> Path:
        """Where the session's file lives (whether or not it exists yet)."""
        k = codec.as_key(key)
        if k.type in SYSTEM_TYPES:
            if not self._system_moved:
                self.move_system_sessions()
            return self.system_dir / codec.key_to_filename(k)
        return self.sessions_dir / codec.key_to_filename(k)

    def move_system_sessions(self) -> int:
        """Move system session files an older version kept in the main folder
        (heartbeat, cron, and the doctor's old ``cli:doctor:doctor``).

        Never overwrites: when the new place already holds that session, the old
        file is kept beside it as ``<name>.before-move`` (nothing is lost).
        Returns how many files were moved.
        """
        self._system_moved = True
        try:
            names = [e.name for e in os.scandir(self.sessions_dir) if is_system_file(e.name)]
        except FileNotFoundError:
            return 0
        moved = 0
        for name in names:
            moved += self._move_one(name)
        return moved

    def _move_one(self, name: str) -> int:
        old = self.sessions_dir / name
        self.system_dir.mkdir(parents=True, exist_ok=True)
        try:
            with self._locked(old):
                try:
                    os.link(old, self.system_dir / name)  # fails if the target exists
                except FileExistsError:
                    os.replace(old, self.system_dir / (name + ".before-move"))
                    return 0
                os.unlink(old)
        except FileNotFoundError:  # another process moved it first
            return 0
        except OSError as exc:
            logger.warning("could not move {} to {}: {}", old, self.system_dir, exc)
            return 0
        logger.info("moved session file {} to {}", name, self.system_dir)
        return 1

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        from filelock import FileLock, Timeout  # lazy: `vikingbot status` only reads

        lock = self._file_locks.get(path.name)
        if lock is None:
            locks_dir = self.sessions_dir / ".locks"
            locks_dir.mkdir(parents=True, exist_ok=True)
            lock = FileLock(locks_dir / (path.name + ".lock"), timeout=self.lock_timeout)
            self._file_locks[path.name] = lock
        try:
            lock.acquire()
        except Timeout as exc:
            raise SessionError(
                f"session file {path} is locked by another process (lock file {lock.lock_file}); "
                f"gave up after {self.lock_timeout:g}s"
            ) from exc
        try:
            yield
        finally:
            lock.release()

    @contextlib.contextmanager
    def locked(self, session: KeyLike | Path) -> Iterator[Path]:
        """Hold one session's file lock; yields the session file's path.

        For code that rewrites a session file itself (pruning): write it with
        temp file + fsync + ``os.replace`` while holding this lock.
        """
        path = session if isinstance(session, Path) else self.path_for(session)
        with self._locked(path):
            yield path

    def turn_lock(self, key: KeyLike) -> asyncio.Lock:
        """The one lock a turn on this session holds, so two turns never interleave."""
        k = codec.as_key(key)
        lock = self._turn_locks.get(k)
        if lock is None:
            lock = self._turn_locks[k] = asyncio.Lock()
        return lock

    # ----------------------------------------------------------------- reads

    def _read_meta_obj(
        self, path: Path | str, expect: SessionKey | None = None
    ) -> tuple[dict[str, Any], SessionMeta] | None:
        try:
            first = _first_line(str(path))
        except OSError as exc:
            raise SessionError(f"cannot read session file {path}: {exc}") from exc
        if first is None:
            return None
        where = f"{path}:1"
        if not first.strip():
            raise SessionError(f"{where}: the metadata line is empty")
        obj = codec.loads_line(first, where)
        meta = codec.meta_from_obj(obj, where)
        if expect is not None and meta.key != expect:
            raise SessionError(f"{where}: file holds session {meta.key}, expected {expect}")
        return obj, meta

    def read_meta_file(self, path: Path | str) -> SessionMeta | None:
        """The metadata line of the session file at ``path`` (``None`` if it is gone).

        Raises :class:`SessionError` naming file and line when it cannot be parsed.
        """
        found = self._read_meta_obj(path)
        return None if found is None else found[1]

    def get_meta(self, key: KeyLike) -> SessionMeta | None:
        """The session's metadata, or ``None`` when there is no such session."""
        k = codec.as_key(key)
        found = self._read_meta_obj(self.path_for(k), k)
        return None if found is None else found[1]

    def list_sessions(self, errors: list[SessionError] | None = None) -> list[SessionMeta]:
        """Every user session's metadata, most recently updated first.

        Heartbeat and cron sessions are not listed (they live in :attr:`system_dir`).

        Reads only the first line of each file, and only for files that changed
        since the last listing (inode, mtime and size are compared). A file whose
        metadata line is broken is left out, logged, and added to ``errors``.
        """
        if not self._system_moved:
            self.move_system_sessions()
        found: list[SessionMeta] = []
        cache: dict[str, tuple[tuple[int, int, int], SessionMeta]] = {}
        try:
            entries = list(os.scandir(self.sessions_dir))
        except FileNotFoundError:
            entries = []
        for entry in entries:
            name = entry.name
            if name.startswith(".") or not name.endswith(codec.SUFFIX):
                continue
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            sig = (st.st_ino, st.st_mtime_ns, st.st_size)
            hit = self._meta_cache.get(name)
            if hit is not None and hit[0] == sig and settled(st.st_mtime_ns):
                meta = hit[1]
            else:
                try:
                    result = self._read_meta_obj(Path(entry.path))
                except SessionError as exc:
                    logger.warning("skipping session file: {}", exc)
                    if errors is not None:
                        errors.append(exc)
                    continue
                if result is None:
                    continue
                meta = result[1]
            cache[name] = (sig, meta)
            found.append(_copy_meta(meta))
        self._meta_cache = cache
        found.sort(key=lambda m: (m.key.type, m.key.channel_id, m.key.chat_id))
        found.sort(key=lambda m: m.updated_at, reverse=True)
        return found

    def _read_lines(self, path: Path) -> list[bytes]:
        try:
            return path.read_bytes().split(b"\n")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SessionError(f"cannot read session file {path}: {exc}") from exc

    def read_messages(self, key: KeyLike, limit: int | None = None) -> list[Message]:
        """The session's messages, oldest first; only the last ``limit`` when given."""
        path = self.path_for(key)
        lines = self._read_lines(path)
        numbered = [(n, raw) for n, raw in enumerate(lines[1:], start=2) if raw.strip()]
        if limit is not None:
            numbered = numbered[-limit:] if limit > 0 else []
        out: list[Message] = []
        for n, raw in numbered:
            where = f"{path}:{n}"
            out.append(codec.message_from_obj(codec.loads_line(raw, where), where))
        return out

    def read_back(self, key: KeyLike) -> tuple[int, Iterator[Message]]:
        """How many messages the session has, and its messages newest first, each parsed
        only when asked for (a reader that needs the tail of a long history parses only it)."""
        path = self.path_for(key)
        numbered = [(n, raw) for n, raw in enumerate(self._read_lines(path)[1:], 2) if raw.strip()]

        def newest_first() -> Iterator[Message]:
            for n, raw in reversed(numbered):
                where = f"{path}:{n}"
                yield codec.message_from_obj(codec.loads_line(raw, where), where)

        return len(numbered), newest_first()

    def message_count(self, key: KeyLike) -> int:
        """How many message lines the session has (counted, not parsed)."""
        lines = self._read_lines(self.path_for(key))
        return sum(1 for raw in lines[1:] if raw.strip())

    # ---------------------------------------------------------------- writes

    def _write(self, path: Path, head: bytes, body_from: Path | None, tail: bytes) -> None:
        """Atomically replace ``path`` with ``head`` + old message lines + ``tail``."""
        folder = path.parent
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(head)
                if body_from is not None:
                    _copy_body(body_from, out)
                out.write(tail)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp_name, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise
        fsync_dir(folder)

    def _new_meta(self, key: SessionKey, skip_heartbeat: bool) -> SessionMeta:
        now = self.clock.now()
        return SessionMeta(key, now, now, None, {"skip_heartbeat": skip_heartbeat})

    def get_or_create(self, key: KeyLike, skip_heartbeat: bool = False) -> SessionMeta:
        """The session's metadata, creating an empty session first if there is none.

        ``skip_heartbeat`` is only used when creating; an existing session keeps
        its own setting (change it with :meth:`update_metadata`).
        """
        k = codec.as_key(key)
        path = self.path_for(k)
        found = self._read_meta_obj(path, k)
        if found is not None:
            return found[1]
        with self._locked(path):
            found = self._read_meta_obj(path, k)
            if found is not None:
                return found[1]
            meta = self._new_meta(k, skip_heartbeat)
            self._write(path, codec.dumps_line(codec.meta_to_obj(meta)), None, b"")
            logger.debug("created session {}", k)
            return meta

    def create_from(self, meta: SessionMeta, messages: list[Message]) -> bool:
        """Write a whole session at once (imports). ``False`` if the key already exists."""
        path = self.path_for(meta.key)
        tail = b"".join(codec.dumps_line(codec.message_to_obj(m)) for m in messages)
        head = codec.dumps_line(codec.meta_to_obj(meta))
        with self._locked(path):
            if path.exists():
                return False
            self._write(path, head, None, tail)
        return True

    def append(self, key: KeyLike, *messages: Message) -> SessionMeta:
        """Add messages at the end (creating the session if needed).

        Sets ``updated_at`` to now and ``last_user_at`` to the newest user message
        that is not a heartbeat or bookkeeping turn.
        """
        k = codec.as_key(key)
        tail = b"".join(codec.dumps_line(codec.message_to_obj(m)) for m in messages)
        path = self.path_for(k)
        with self._locked(path):
            found = self._read_meta_obj(path, k)
            base, meta = found if found is not None else ({}, self._new_meta(k, False))
            last_user = meta.last_user_at
            for m in messages:
                if codec.counts_as_user(m) and (last_user is None or m.timestamp > last_user):
                    last_user = m.timestamp
            meta = replace(meta, updated_at=self.clock.now(), last_user_at=last_user)
            head = codec.dumps_line(codec.meta_to_obj(meta, base))
            self._write(path, head, path if found is not None else None, tail)
        return meta

    def append_counted(
        self, key: KeyLike, seen: int, make: Callable[[int], Message]
    ) -> SessionMeta:
        """Append ``make(extra)`` (a compaction summary entry, ``agent.compact``) where
        ``extra`` is how many messages were appended since the caller counted ``seen``,
        all under the session's lock, so an entry never covers messages its writer did
        not read."""
        path = self.path_for(key)
        with self._locked(path):  # filelock locks are reentrant: append takes it again
            count = self.message_count(key)
            return self.append(key, make(max(0, count - seen)))

    def update_metadata(self, key: KeyLike, **changes: Any) -> SessionMeta:
        """Merge ``changes`` into the ``metadata`` dict (a ``None`` value removes a key).

        Raises :class:`SessionError` for an unknown session. Messages and
        ``updated_at`` are left as they are.
        """
        k = codec.as_key(key)
        path = self.path_for(k)
        with self._locked(path):
            found = self._read_meta_obj(path, k)
            if found is None:
                raise SessionError(f"unknown session {k} (no file {path})")
            base, meta = found
            metadata = dict(meta.metadata)
            for name, value in changes.items():
                if value is None:
                    metadata.pop(name, None)
                else:
                    metadata[name] = value
            meta = replace(meta, metadata=metadata)
            head = codec.dumps_line(codec.meta_to_obj(meta, base))
            self._write(path, head, path, b"")
        return meta

    def reset(self, key: KeyLike) -> SessionMeta | None:
        """Drop every message, keep the metadata. ``None`` (and no file) if unknown."""
        k = codec.as_key(key)
        path = self.path_for(k)
        with self._locked(path):
            found = self._read_meta_obj(path, k)
            if found is None:
                return None
            base, meta = found
            meta = replace(meta, updated_at=self.clock.now())
            self._write(path, codec.dumps_line(codec.meta_to_obj(meta, base)), None, b"")
        logger.info("reset session {}", k)
        return meta


def is_system_file(name: str) -> bool:
    """Whether a file name in the sessions folder is a system session's (heartbeat, cron,
    doctor), which belongs in :data:`SYSTEM_DIR`."""
    return (name.startswith(_SYSTEM_PREFIXES) and name.endswith(codec.SUFFIX)) or (
        name in OLD_SYSTEM_FILES
    )


def _first_line(path: str) -> bytes | None:
    """The file's first line (with its newline), or ``None`` if the file is missing."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        chunks: list[bytes] = []
        want = 4096  # a metadata line is short: read little of a long history
        while chunk := os.read(fd, want):
            end = chunk.find(b"\n")
            if end >= 0:
                chunks.append(chunk[: end + 1])
                break
            chunks.append(chunk)
            want = 1 << 16
        return b"".join(chunks)
    finally:
        os.close(fd)


def _copy_meta(meta: SessionMeta) -> SessionMeta:
    return SessionMeta(
        meta.key, meta.created_at, meta.updated_at, meta.last_user_at, dict(meta.metadata)
    )


def _copy_body(source: Path, out: IO[bytes]) -> None:
    """Copy every line after the first, byte for byte, ending with a newline."""
    with source.open("rb") as fh:
        fh.readline()
        last = b"\n"
        while chunk := fh.read(1 << 20):
            out.write(chunk)
            last = chunk[-1:]
        if last != b"\n":
            out.write(b"\n")
