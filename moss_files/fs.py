"""Files on disk: guarded reads, atomic durable writes, cross-process locks, appends.

Edge layer: the only module that writes artifact files. Every write goes to a temporary file in
the same folder (`.<name>.tmp-<pid>-<random>`), is fsynced, renamed over the target, and the
folder is fsynced. Read-modify-write takes the target's lock (`.<name>.lock`, next to it, never
deleted) and refuses to replace a file whose bytes changed since they were read, which is how a
hand edit made in an editor (which takes no lock) survives a concurrent tool write.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import hashlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moss_files import document
from moss_files.document import Document
from moss_files.errors import Conflict, InvalidRequest, MossError, NotFound

LOCK_SUFFIX = ".lock"
TEMP_MARKER = ".tmp-"
DEFAULT_LOCK_TIMEOUT = 10.0
DEFAULT_RETRIES = 5


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A file's bytes as read, with the fingerprint used to detect later changes."""

    path: Path
    data: bytes | None  # None: the file did not exist
    digest: str

    @property
    def exists(self) -> bool:
        return self.data is not None


def digest_of(data: bytes | None) -> str:
    """Content fingerprint; the empty string stands for a missing file."""
    return "" if data is None else hashlib.blake2b(data, digest_size=16).hexdigest()


def read_snapshot(path: Path) -> Snapshot:
    """Read a file's bytes (a missing file gives a snapshot with `data=None`)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Snapshot(path, None, "")
    except IsADirectoryError:
        raise InvalidRequest("is a directory, not a file", path=path) from None
    except PermissionError as exc:
        raise MossError(f"cannot read file: {exc.strerror}", path=path) from None
    return Snapshot(path, data, digest_of(data))


def read_document(path: Path, *, max_bytes: int = document.DEFAULT_MAX_BYTES) -> Document:
    """Read and parse one document. Raises NotFound, or InvalidDocument with file and line."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NotFound("no such file", path=path) from None
    except IsADirectoryError:
        raise InvalidRequest("is a directory, not a file", path=path) from None
    except PermissionError as exc:
        raise MossError(f"cannot read file: {exc.strerror}", path=path) from None
    return document.parse_bytes(data, path, max_bytes=max_bytes)


def temp_path_for(path: Path) -> Path:
    """A fresh temporary name next to `path`, matching the pattern watchers and git ignore."""
    return path.with_name(f".{path.name}{TEMP_MARKER}{os.getpid()}-{secrets.token_hex(4)}")


def is_temporary(path: Path) -> bool:
    """True for our temporary and lock files, which scanners and watchers must skip."""
    name = path.name
    return name.startswith(".") and (TEMP_MARKER in name or name.endswith(LOCK_SUFFIX))


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace (or create) `path` with `data` atomically and durably; the file keeps its mode
    unless `mode` is given."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _durable_temp(path, data, mode)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def create_exclusive(path: Path, data: bytes) -> bool:
    """Create `path` with `data` unless it exists; True when this call created it.

    Durable like write_atomic, and never replaces an existing file (link(2) fails on EEXIST).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = temp_path_for(path)
    with open(temp, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    finally:
        temp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return True


def append_line(path: Path, line: bytes) -> None:
    """Append one record with a single write(2) on an O_APPEND descriptor, then fsync."""
    if not line.endswith(b"\n"):
        line += b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666 & ~_umask())
    try:
        written = os.write(fd, line)
        if written != len(line):
            raise MossError(f"short append ({written} of {len(line)} bytes)", path=path)
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename in it survives a power cut."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_umask_lock = threading.Lock()


def _umask() -> int:
    # os.umask can only be read by setting it; guard so threads never see a zero umask.
    with _umask_lock:
        current = os.umask(0o022)
        os.umask(current)
    return current


def lock_path_for(path: Path) -> Path:
    """The lock file that guards `path`."""
    return path.with_name(f".{path.name}{LOCK_SUFFIX}")


@contextmanager
def locked(path: Path, *, timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the cross-process (and cross-thread) lock for `path`.

    Each acquisition opens its own descriptor, and flock(2) locks belong to the open file, so
    two threads of one process exclude each other just as two processes do.

    Raises Conflict LOCK_TIMEOUT when the lock is not free within `timeout` seconds.
    """
    lock_file = lock_path_for(path)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
    try:
        deadline = time.monotonic() + timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise Conflict(
                        f"lock held by another writer for over {timeout:g}s",
                        code="LOCK_TIMEOUT",
                        path=path,
                        hint="another moss-files process is writing this file; retry when it is done",
                    ) from None
                time.sleep(delay)  # polling a held lock; bounded by the deadline above
                delay = min(delay * 2, 0.05)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def write_if_unchanged(snapshot: Snapshot, data: bytes) -> None:
    """Write `data` to the snapshot's file unless its bytes changed since the snapshot.

    The caller must hold `locked(snapshot.path)`, which keeps cooperating writers out; a hand
    edit takes no lock, so it is caught here. The new bytes are made durable in a temporary
    first; then, where the kernel can swap two names atomically (Linux), the temporary and the
    file are exchanged and the displaced file is compared with the snapshot: if it changed, the
    swap is undone, so even an edit landing an instant before the swap is kept. Elsewhere the
    comparison happens just before the rename, leaving only that instant uncovered.

    Raises Conflict STALE_WRITE on a change (nothing is written).
    """
    path = snapshot.path
    if snapshot.data is None:
        if not create_exclusive(path, data):
            raise _stale(snapshot, read_snapshot(path))
        return
    temp = _durable_temp(path, data)
    try:
        if exchange(temp, path):
            displaced = read_snapshot(temp)
            if displaced.digest != snapshot.digest:
                exchange(temp, path)  # put the hand-edited file back
                raise _stale(snapshot, displaced)
        else:
            current = read_snapshot(path)
            if current.digest != snapshot.digest:
                raise _stale(snapshot, current)
            os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def _stale(snapshot: Snapshot, current: Snapshot) -> Conflict:
    return Conflict(
        "file changed since it was read; nothing was written",
        code="STALE_WRITE",
        path=snapshot.path,
        details={"expected_digest": snapshot.digest, "actual_digest": current.digest},
        hint="read it again and retry",
    )


def _durable_temp(path: Path, data: bytes, mode: int | None = None) -> Path:
    """Write `data` to a fresh temporary next to `path`, fsynced, with `mode` (default: the
    mode `path` has, else the umask's)."""
    temp = temp_path_for(path)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_exchange_state: dict[str, Any] = {}


def exchange(first: Path, second: Path) -> bool:
    """Atomically swap the files named `first` and `second` (Linux renameat2 RENAME_EXCHANGE).

    Returns False, having done nothing, where the kernel or file system cannot do it.
    """
    if _exchange_state.get("unsupported"):
        return False
    renameat2 = _exchange_state.get("renameat2")
    if renameat2 is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            renameat2 = libc.renameat2
        except (OSError, AttributeError):
            _exchange_state["unsupported"] = True
            return False
        renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        _exchange_state["renameat2"] = renameat2
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        _exchange_state["unsupported"] = True
        return False
    raise OSError(code, os.strerror(code), str(second))


def modify(
    path: Path,
    transform: Callable[[Snapshot], bytes | None],
    *,
    retries: int = DEFAULT_RETRIES,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> Snapshot:
    """Read-modify-write `path` under its lock; return the snapshot of what was written.

    `transform` receives the current snapshot and returns new bytes, or None to leave the file
    alone. If the file changes between the read and the write (a hand edit, which takes no
    lock), the transform runs again on the new content, up to `retries` times.

    Raises Conflict STALE_WRITE when the file keeps changing, LOCK_TIMEOUT when the lock is held.
    """
    with locked(path, timeout=timeout):
        for _attempt in range(retries):
            snapshot = read_snapshot(path)
            new = transform(snapshot)
            if new is None or new == snapshot.data:
                return snapshot
            try:
                write_if_unchanged(snapshot, new)
            except Conflict as exc:
                if exc.code == "STALE_WRITE":
                    continue
                raise
            return Snapshot(path, new, digest_of(new))
    raise Conflict(
        f"file kept changing during {retries} attempts; nothing was written",
        code="STALE_WRITE",
        path=path,
    )


def modify_document(
    path: Path,
    transform: Callable[[Document], str | None],
    *,
    retries: int = DEFAULT_RETRIES,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
    max_bytes: int = document.DEFAULT_MAX_BYTES,
) -> Document:
    """Like `modify`, for a markdown document: `transform(doc)` returns new text or None.

    Keeps the file's BOM. Raises NotFound for a missing file and InvalidDocument for a
    malformed one (untouched).
    """

    def step(snapshot: Snapshot) -> bytes | None:
        if snapshot.data is None:
            raise NotFound("no such file", path=path)
        doc = document.parse_bytes(snapshot.data, path, max_bytes=max_bytes)
        new_text = transform(doc)
        return None if new_text is None else document.encode(new_text, doc.bom)

    written = modify(path, step, retries=retries, timeout=timeout)
    assert written.data is not None
    return document.parse_bytes(written.data, path, max_bytes=max_bytes)


def iter_files(root: Path, suffix: str = ".md") -> Iterator[Path]:
    """Files under `root` with `suffix`, skipping dot-folders' temp/lock files, sorted by path."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            candidate = Path(dirpath, name)
            if name.endswith(suffix) and not is_temporary(candidate):
                yield candidate
