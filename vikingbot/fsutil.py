"""Writing files users care about: atomically, never half-written, and never over an edit.

``atomic_write_bytes`` / ``atomic_write_text``: temp file in the same folder,
fsync, ``os.replace``, fsync of the folder.

``locked_edit`` / ``edit_file``: the one compare-and-swap editor for files both
vikingbot and people edit (HEARTBEAT.md, config.json, agent file edits). It
takes an OS lock beside the file (``.<name>.lock``), reads the file, lets the
caller compute the new text, and replaces the file only if it is still the
file that was read: immediately before the rename it compares device, inode,
size, mtime and ctime with what it read. An editor that does not take the
lock and saves meanwhile wins: the edit runs again on the fresh text; from
the second conflict on, what was only appended (whole lines) is appended to
the new text instead, so a steady stream of appends cannot starve the edit;
up to ``TRIES`` times. A write that reaches the old file between the check and
the rename (an appender that had it open) is found on the old file's
descriptor and carried over the same way, looked for at once and again
``LATE_WRITE_GRACE_S`` after the rename. The retries after the first write the new text and
rename it before its fsync (the file is fsynced right after the rename), so
the window in which an outside save can slip in is the time of one read,
one edit and one write, not of an fsync: that is what lets a rewrite win
against a steady stream of appends.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from vikingbot.errors import VikingbotError

# A file changed within this long may change again without its (mtime, size) changing:
# timestamps are coarse on some file systems (git's "racy clean" rule). Everything that
# compares file identities to skip a read treats a younger one as unknown.
RACY_NS = 2_000_000_000


def settled(time_ns: int) -> bool:
    """Whether a file time (ns) is older than the racy window (:data:`RACY_NS`)."""
    return time.time_ns() - time_ns > RACY_NS


BOM = "\ufeff"
TRIES = 25
# how long after a rename a write into the replaced file is still looked for (an
# appender that opened it just before the rename and was descheduled before writing)
LATE_WRITE_GRACE_S = 0.02

Identity = tuple[int, int, int, int, int]


def new_file_mode() -> int:
    """The mode a new file gets here: ``0o666`` less the process umask (a gateway sets
    ``077``: ``0o600``), read without changing it (``/proc``; else the usual ``022``)."""
    umask = 0o022
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                umask = int(line.split()[1], 8)
                break
    return 0o666 & ~umask


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        elif path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def lock_path(path: Path) -> Path:
    """The lock file every writer of ``path`` takes: ``.HEARTBEAT.md.lock`` beside it."""
    return path.with_name(f".{path.name}.lock")


def locked_edit(
    path: Path,
    fn: Callable[[str], str],
    *,
    lock_timeout: float = 10,
    error: type[VikingbotError] = VikingbotError,
    mode: int | None = None,
) -> str:
    """Rewrite ``path`` through ``fn`` under the lock, as a compare-and-swap.

    ``fn`` gets the current text (``""`` for a missing file, a BOM removed and
    restored around it) and returns the new text; it is called again when the
    file changes underneath. Returns the text written (or left). Failures
    raise ``error`` with a message for the user. ``mode`` sets the file's
    permissions (default: keep them; 0644 for a new file).
    """

    def edit(text: str | None) -> str:
        doc_bom = text is not None and text.startswith(BOM)
        body = (text or "").removeprefix(BOM)
        new = fn(body)
        return BOM + new if doc_bom and not new.startswith(BOM) else new

    return (
        edit_file(path, edit, lock_timeout=lock_timeout, create=True, error=error, mode=mode) or ""
    )


def edit_file(
    path: Path,
    edit: Callable[[str | None], str | None],
    *,
    lock_timeout: float = 10,
    create: bool = False,
    error: type[VikingbotError] = VikingbotError,
    mode: int | None = None,
) -> str | None:
    """The core of ``locked_edit``: ``edit`` gets ``None`` for a missing file and may
    return ``None`` to leave the file alone."""
    from filelock import FileLock, Timeout

    if path.is_symlink():
        raise error(
            f"{path} is a symbolic link; vikingbot does not rewrite it (replace it with a file)"
        )
    lock = FileLock(str(lock_path(path)), timeout=lock_timeout)
    try:
        with lock.acquire(poll_interval=0.01):
            return _edit_locked(path, edit, create, error, mode)
    except Timeout as exc:
        raise error(
            f"could not lock {path} within {lock_timeout:g} s "
            f"(lock file {lock_path(path)}); another writer holds it"
        ) from exc
    except OSError as exc:
        raise error(f"could not rewrite {path}: {exc.strerror or exc}") from exc


def _edit_locked(
    path: Path,
    edit: Callable[[str | None], str | None],
    create: bool,
    error: type[VikingbotError],
    mode: int | None,
) -> str | None:
    base, seen = read_with_identity(path)  # what the file holds, and its identity
    text = None if base is None else _decode(path, base, error)
    new = edit(text)
    if new is None or new == text or (base is None and (not create or not new)):
        return new
    payload = new.encode("utf-8")
    for attempt in range(TRIES):
        done = _replace_if_unchanged(path, payload, seen, sync_first=attempt == 0, mode=mode)
        if done is True:
            return payload.decode("utf-8")
        base, seen, merged, source = _after_conflict(path, done, base, payload, attempt)
        if merged is not None:
            payload = merged
            continue
        text = None if source is None else _decode(path, source, error)
        redone = edit(text)
        payload = (redone if redone is not None else text or "").encode("utf-8")
    raise error(f"{path} kept changing while being rewritten ({TRIES} tries); try again")


def _after_conflict(
    path: Path,
    done: bool | tuple[bytes, Identity],
    base: bytes | None,
    payload: bytes,
    attempt: int,
) -> tuple[bytes | None, Identity | None, bytes | None, bytes | None]:
    """After a lost race: (what the file holds, its identity, the payload with an append
    merged in, or ``None`` and the text to run the edit on again)."""
    if done is False:  # changed before the rename: edit again (from the 2nd time, merge appends)
        fresh, seen = read_with_identity(path)
        tail = _appended(base, fresh) if attempt else None
        return fresh, seen, (payload + tail if tail is not None else None), fresh
    assert done is not True
    late, mine = done  # a write reached the old file as it was replaced; the file holds payload
    tail = _appended(base, late)
    return payload, mine, (payload + tail if tail is not None else None), late


def _appended(before: bytes | None, after: bytes | None) -> bytes | None:
    """What was appended to ``before`` to give ``after`` (whole lines only), or ``None``."""
    if before is None or after is None or (before and not before.endswith(b"\n")):
        return None
    return after[len(before) :] if after.startswith(before) else None


def _identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_with_identity(path: Path) -> tuple[bytes | None, Identity | None]:
    """The file's bytes and the identity they belong to (``None, None`` when missing).

    The identity is taken before and after the read; a write in between makes
    it read again, so the two always describe the same content.
    """
    for _ in range(TRIES):
        try:  # never blocking: a named pipe in the file's place is refused, not waited on
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None, None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file", str(path))
            os.set_blocking(fd, True)
            before = _identity(os.fstat(fd))
            data = fh.read()
            after = _identity(os.fstat(fd))
        if before == after and len(data) == after[2]:
            return data, after
    return data, None  # never steady: the compare before the rename will fail and retry


def _current(path: Path) -> Identity | None:
    try:
        return _identity(os.stat(path))
    except FileNotFoundError:
        return None


def _decode(path: Path, data: bytes, error: type[VikingbotError]) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{path} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "not rewriting it"
        ) from exc


def _replace_if_unchanged(
    path: Path, data: bytes, expected: Identity | None, *, sync_first: bool, mode: int | None
) -> bool | tuple[bytes, Identity]:
    """Write ``data`` beside ``path`` and rename it in, if ``path`` is still ``expected``.

    Returns False (and writes nothing) when the file changed since it was read:
    an editor that does not take our lock saved meanwhile. Returns the old
    file's bytes and the new file's identity when a write reached the old file
    between the check and the rename (an appender that had it open), so the
    caller can redo the edit on top of them instead of losing that write.
    """
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = new_file_mode()
    old = _open_old(path) if expected is not None else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if sync_first:
                os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), mode)
            if _current(path) != expected or (old is not None and _fd_identity(old) != expected):
                os.unlink(tmp)
                return False
            os.replace(tmp, path)
            if not sync_first:
                os.fsync(fh.fileno())
            mine = _identity(os.fstat(fh.fileno()))
        fsync_dir(path.parent)
        if old is not None and expected is not None and _written_late(old, expected):
            return _read_fd(old), mine
        return True
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        if old is not None:
            os.close(old)


def _written_late(old: int, expected: Identity) -> bool:
    """Whether a write reached the replaced file after the check before the rename:
    looked at at once, and once more ``LATE_WRITE_GRACE_S`` later, for an
    appender that opened the file just before the rename and was descheduled before
    its write (``echo >>`` opens, then writes; on a busy machine a line was lost that
    way). A writer that keeps the file open longer than that writes into the replaced
    file, as it would with any editor that saves by renaming.

    Only size and mtime count: the rename itself changes the old file's ctime.
    """
    if _fd_identity(old)[2:4] != expected[2:4]:
        return True
    time.sleep(LATE_WRITE_GRACE_S)
    return _fd_identity(old)[2:4] != expected[2:4]


def _open_old(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None


def _fd_identity(fd: int) -> Identity:
    return _identity(os.fstat(fd))


def _read_fd(fd: int) -> bytes:
    chunks, pos = [], 0
    while chunk := os.pread(fd, 1 << 20, pos):
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


_DISK_ERRNOS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
}
_DISK_TEXTS = (
    ("database or disk is full", "the disk is full"),
    ("no space left on device", "the disk is full"),
    ("disk quota exceeded", "the disk quota is used up"),
    ("read-only file system", "the file system is read-only"),
    ("readonly database", "the file system is read-only"),
)


def disk_problem(error: BaseException | str | None) -> str | None:
    """ "the disk is full" / "... read-only" when ``error`` (or what caused it) came from the
    disk, else ``None``. Reads OS error numbers and the texts SQLite and the OS use."""
    seen: set[int] = set()
    current: BaseException | str | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _DISK_ERRNOS:
            return _DISK_ERRNOS[current.errno]
        text = str(current).lower()
        for needle, problem in _DISK_TEXTS:
            if needle in text:
                return problem
        if isinstance(current, str):
            return None
        current = current.__cause__ or current.__context__
    return None


def disk_path(error: BaseException) -> str | None:
    """The file an OS error (or what caused it) names, if any."""
    current: BaseException | None = error
    for _ in range(10):
        if current is None:
            return None
        if isinstance(current, OSError) and current.filename:
            return str(current.filename)
        current = current.__cause__ or current.__context__
    return None
