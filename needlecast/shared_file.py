"""A mailbox file that agents append to and people edit, changed without losing either.

Edge layer: the raw-file protocol under the mailbox's rewrites of `inbox.md` and `outbox.md`,
the one place needlecast opens files itself. `rewrite` replaces a file that writers who take
no lock may change at any moment (an agent appending with `>>`, an editor saving the whole
file) without losing what they write, and a kill at any instant leaves at worst a marked side
file (`.<name>.tmp-ready|prev|aside-<pid>-<hex>`) that the next call folds back with the
caller's `merge` rule. Whole-file reads, durable writes, appends and locks are
`moss_files.foundation.fs`'s; a descriptor is opened here only to keep it across a rewrite or
to read a long file's ends (`open_read`), and bytes are appended here only when they may end
mid-line (`carry_over`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from moss_files.foundation import conflicts, fs
from moss_files.foundation.errors import Conflict, InvalidRequest

# Our side files: a plain temporary (no kind), a complete new version (`ready`), the version
# an exchange displaced (`prev`), a v2 outbox file set aside while it is compared (`aside`).
LEFTOVER = re.compile(r"^\.(?P<name>.+)\.tmp-(?:(?P<kind>ready|prev|aside)-)?(?P<pid>\d+)-[0-9a-f]+$")


def read_if_any(path: Path) -> bytes | None:
    """A file's bytes; None when it is missing (or a file stands where its folder should be).
    Raises SYMLINK_REFUSED for a link, NOT_REGULAR_FILE for a folder, FIFO or device,
    NOT_READABLE when permission is denied."""
    try:
        return fs.read_bytes(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except InvalidRequest:
        return None  # a file where the folder should be: nothing to read there


def read_in(dir_fd: int, folder: Path, name: str) -> bytes | None:
    """`read_if_any` for the file `name` of a folder already open as `dir_fd`: a batch of reads
    in one folder opens the folder once, where each `fs.read_bytes` walks down to it again."""
    try:
        fd = fs.open_regular(name, dir_fd=dir_fd, shown=folder / name)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return read_fd(fd)
    finally:
        os.close(fd)


def side_name(path: Path, kind: str) -> Path:
    """A fresh side-file name next to `path`, marked with `kind` (ready, prev or aside)."""
    return path.with_name(f".{path.name}.tmp-{kind}-{os.getpid()}-{secrets.token_hex(4)}")


def write_ready(path: Path, data: bytes) -> Path:
    """Write `data` durably next to `path` under a fresh `ready` name; return that name.

    Only a fully written file carries the `ready` mark (`fs.create_exclusive` links it into
    place after its fsync); recovery trusts no other.
    """
    while True:
        ready = side_name(path, "ready")
        if fs.create_exclusive(ready, data):
            return ready


def open_read(path: Path) -> int:
    """A read-only descriptor of the regular file `path` (the caller closes it), reached
    without following a link below the toolkit folder. A rewrite keeps it to know the file it
    replaces, and a long mailbox is read in parts through it; whole reads use `fs.read_bytes`.

    Raises FileNotFoundError, InvalidDocument SYMLINK_REFUSED for a link, NOT_REGULAR_FILE
    for anything but a regular file (opening a FIFO must not block), NOT_READABLE.
    """
    with fs.folder_fd(path.parent) as dir_fd:
        return fs.open_regular(path.name, dir_fd=dir_fd, shown=path)


def carry_over(path: Path, data: bytes) -> None:
    """Append to `path` the bytes another writer added to the file a rewrite replaced.

    Not `fs.append_line`: these bytes may end mid-line (a writer between two writes) and must
    not gain a line break.
    """
    with fs.folder_fd(path.parent) as dir_fd:
        fd = os.open(path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
    try:
        fs.write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


Merge = Callable[[bytes | None, bytes], bytes]
"""`merge(current, leftover)` returns the bytes to append to `current` so that nothing the
leftover holds is lost (empty when `current` already has all of it)."""


def clear_dead_temporaries(folder: Path, names: list[str] | None = None) -> None:
    """Delete temporaries that writers killed mid-write left in `folder` (caller holds its lock),
    among `names` when the caller has just listed it.

    A temporary of a file-per-message folder is never the only copy of anything: the message is
    still in the sender's outbox until its delivery completes.
    """
    for name in list_names(folder) if names is None else names:
        match = LEFTOVER.match(name)
        if match and match.group("kind") is None and not fs.process_alive(int(match.group("pid"))):
            (folder / name).unlink(missing_ok=True)


def refuse_conflicted(path: Path, data: bytes | None) -> None:
    """Raise MERGE_CONFLICT when `data` (the file's bytes) holds git conflict markers: no
    rewrite, append or recovery ever writes to such a file."""
    if data and (b"<<<<<<<" in data or b">>>>>>>" in data or b"|||||||" in data):
        conflicts.check_no_conflict(data.decode("utf-8", "surrogateescape"), path)


# How long a displaced version is kept after its blocks are back in the file, when the caller
# says they are not yet settled (see `fold_leftovers`): long enough for any editor save that
# raced the fold to be followed by a routing pass, short enough that a block a person deletes
# by hand later is not brought back.
KEEP_UNSETTLED_SECONDS = 600.0


def fold_leftovers(path: Path, merge: Merge, settled: Callable[[bytes], bool] | None = None, *, only: str | None = None) -> None:
    """Fold leftovers of an interrupted rewrite of `path` back into it (caller holds the lock);
    with `only`, just the side file of that name. Raises MERGE_CONFLICT, leaving the leftovers,
    when the file holds conflict markers.

    A leftover is deleted once the file holds what it held, unless `settled(leftover bytes)`
    says its content still needs it: an editor that read the file before our append and saves
    after it writes our append away, and only the leftover still has those blocks, which the
    next fold puts back. Such a leftover is kept until settled, or for KEEP_UNSETTLED_SECONDS
    after it was set aside."""
    names = [only] if only is not None else list_names(path.parent)
    if any((m := LEFTOVER.match(n)) and m.group("name") == path.name for n in names):
        refuse_conflicted(path, read_if_any(path))
    for name in names:
        match = LEFTOVER.match(name)
        if not match or match.group("name") != path.name:
            continue
        leftover = path.parent / name
        if match.group("kind") is None:
            # A temporary that never got its `ready` mark holds nothing that is not elsewhere.
            if not fs.process_alive(int(match.group("pid"))):
                leftover.unlink(missing_ok=True)
            continue
        content = read_if_any(leftover) or b""
        for _attempt in range(10):
            missing = merge(read_if_any(path), content)
            if not missing:
                break
            fs.append_line(path, missing)  # whole blocks, each ending in a line break
        else:
            raise Conflict("could not fold an interrupted rewrite back into the file", code="STALE_WRITE", path=path)
        if settled is not None and not settled(content) and not _older_than(leftover, KEEP_UNSETTLED_SECONDS):
            continue
        leftover.unlink(missing_ok=True)
        fs.fsync_dir(path.parent)


def _older_than(path: Path, seconds: float) -> bool:
    """True when `path` was last renamed or written more than `seconds` ago (or is gone)."""
    try:
        return time.time() - os.lstat(path).st_ctime > seconds
    except FileNotFoundError:
        return True


def rewrite(
    path: Path,
    transform: Callable[[bytes | None], bytes | None],
    merge: Merge,
    *,
    timeout: float = fs.DEFAULT_LOCK_TIMEOUT,
    exchange: bool = True,
    settled: Callable[[bytes], bool] | None = None,
    fold_others: bool = True,
) -> bool:
    """Replace `path` with `transform(current bytes)` without losing concurrent writes.

    Writers that take no lock (an agent appending with `>>`, an editor saving the whole file)
    may change the file at any moment. The new content is written to a temporary and swapped
    in with an atomic exchange, so the displaced file survives under the temporary's name:
    if it is the inode we read, anything appended after our read is appended to the new file;
    if it is anything else (an editor's save), `merge` folds what it holds back in. A crash at
    any point leaves at worst a marked temporary that the next call folds back the same way.
    Where the exchange is unsupported (or `exchange` is False) the file is compared just before
    an ordinary rename and bytes appended to the replaced file afterwards are carried over;
    only an editor's save landing between that comparison and the rename could then be lost.
    `settled` decides when a displaced version may go (`fold_leftovers`). With `fold_others`
    False, side files that other rewrites left are left to their owners (the router folds an
    outbox's by what its journal knows, which a caller without the journal cannot): only the
    version this call displaces is folded back.
    Returns True when the file was changed. Raises Conflict LOCK_TIMEOUT / STALE_WRITE, and
    InvalidDocument MERGE_CONFLICT for a file git left with conflict markers (never written).
    """
    fs.check_confined(path)
    with fs.locked(path, timeout=timeout):
        if fold_others:
            fold_leftovers(path, merge, settled)
        for _attempt in range(20):
            try:
                fd: int | None = open_read(path)
            except FileNotFoundError:
                fd = None
            try:
                data = read_fd(fd) if fd is not None else None
                refuse_conflicted(path, data)
                new = transform(data)
                if new is None or new == data:
                    return False
                if fd is None or data is None:
                    if fs.create_exclusive(path, new):
                        return True
                    continue  # created meanwhile by someone else: start over from it
                ready = write_ready(path, new)
                if exchange and fs.exchange(ready, path):
                    displaced = side_name(path, "prev")
                    os.rename(ready, displaced)
                    if os.stat(displaced).st_ino == os.fstat(fd).st_ino:
                        now = read_if_any(displaced) or b""
                        if now.startswith(data):
                            if len(now) > len(data):
                                carry_over(path, now[len(data) :])
                            displaced.unlink()
                            fs.fsync_dir(path.parent)
                            return True
                    fold_leftovers(path, merge, settled, only=None if fold_others else displaced.name)
                    fs.fsync_dir(path.parent)
                    return True
                current = read_if_any(path)
                if current != data:
                    ready.unlink(missing_ok=True)
                    continue
                os.replace(ready, path)
                late = read_fd(fd, offset=len(data))
                if late:
                    carry_over(path, late)
                fs.fsync_dir(path.parent)
                return True
            finally:
                if fd is not None:
                    os.close(fd)
    raise Conflict("file kept changing; nothing was written", code="STALE_WRITE", path=path)


def read_fd(fd: int, offset: int = 0) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def read_ends(path: Path, head_size: int = 8192, tail_size: int = 2) -> tuple[bytes | None, bytes]:
    """The first `head_size` bytes and the last `tail_size` bytes of a file (None, b"" when
    it is missing): enough to choose the key case and the separator, or to find a recent
    block, without reading a long mailbox whole."""
    try:
        fd = open_read(path)
    except FileNotFoundError:
        return None, b""
    try:
        head = os.pread(fd, head_size, 0) if head_size else b""
        return head, read_fd(fd, offset=max(0, os.fstat(fd).st_size - tail_size))
    finally:
        os.close(fd)


# A few files are made durable by fsyncs issued together from a few threads: the file system
# commits the fsyncs that wait at the same moment in one journal transaction (ext4 and xfs group
# them), so they cost about one commit. From SYNCFS_FROM files (or folders) on, one syncfs(2) of
# the file system replaces them where the C library has it: a single flush of the disk's cache,
# where each fsync ends in one (measured on the development VM in an end-to-end burst: 515-570
# messages/s with syncfs from 8 files, 410-490 with grouped fsyncs up to 256). syncfs also waits
# for other processes' unwritten data, which is why a pass of one or two messages, whose
# delivery time is what a person notices, does not use it.
FSYNC_THREADS = 8
SYNCFS_FROM = 8
# Files written before their fsyncs, at most: each keeps a descriptor open until then.
FSYNC_CHUNK = 256
_syncfs_state: dict[str, Any] = {}


def _syncfs() -> Callable[[int], int] | None:
    if "call" not in _syncfs_state:
        call = fs.libc_function("syncfs")  # None: not Linux, or a C library without it
        if call is not None:
            call.argtypes = [ctypes.c_int]
        _syncfs_state["call"] = call
    return _syncfs_state["call"]


def _syncfs_or_raise(any_fd: int) -> None:
    """One syncfs of the file system holding `any_fd`. Raises OSError when it fails (what it
    was to make durable may not have reached the disk)."""
    call = _syncfs()
    assert call is not None
    if call(any_fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"syncfs failed: {os.strerror(code)}")


def fsync_all(fds: list[int]) -> None:
    """Make every descriptor of `fds` durable: one syncfs from SYNCFS_FROM of them on (all on
    one file system), else their fsyncs at once, from FSYNC_THREADS threads, so that the file
    system commits them together. Raises the first failure (OSError)."""
    if len(fds) >= SYNCFS_FROM and _syncfs() is not None and len({os.fstat(fd).st_dev for fd in fds}) == 1:
        _syncfs_or_raise(fds[0])
        return
    if len(fds) <= 1:
        for fd in fds:
            os.fsync(fd)
        return
    # The caller's thread and up to FSYNC_THREADS - 1 helpers, which end with the call.
    pending = iter(fds)
    guard = threading.Lock()
    failures: list[OSError] = []

    def work() -> None:
        while True:
            with guard:
                fd = next(pending, None)
            if fd is None:
                return
            try:
                os.fsync(fd)
            except OSError as exc:
                failures.append(exc)

    helpers = [threading.Thread(target=work, name="needlecast-fsync", daemon=True) for _ in range(min(FSYNC_THREADS, len(fds)) - 1)]
    for helper in helpers:
        helper.start()
    work()
    for helper in helpers:
        helper.join()
    if failures:
        raise failures[0]


def create_many(folder: Path, files: list[tuple[str, bytes]], *, chunk: int | None = None) -> list[bool]:
    """Create each (name, data) in `folder` unless the name exists; True where created
    (`create_in_folders` for one folder)."""
    return create_in_folders([(folder, files)], chunk=chunk)[0]


def create_in_folders(groups: list[tuple[Path, list[tuple[str, bytes]]]], *, settle: bool = True, chunk: int | None = None) -> list[list[bool]]:
    """Create each (name, data) of each (folder, files) group unless the name exists; per
    group, True where created.

    The same promise as `fs.create_exclusive` for each file (durable before it has its name,
    never replacing a file), at the cost of two durable steps for the whole batch instead of
    two per file: the temporaries are written and made durable together (one syncfs from
    SYNCFS_FROM files on, else `fsync_all`), then each takes its name (a rename that never
    replaces a file, else a link), and the names are made durable together (`fsync_all` of
    the folders). A kill in between leaves temporaries that `clear_dead_temporaries` removes,
    and names that either hold their whole content or do not exist; the callers' journals make
    a repeated batch skip what is there.

    With `chunk`, the files are written, made durable and named in parts, in order: `chunk`
    files, then twice as many, and so on, so that a reader (the router) can take the first
    ones while the rest are being written, in a few parts whatever the batch's size (each part
    is one more durable step, and each a reader's pass); the names are still made durable
    together at the end. With `settle` False the names are left
    for the caller to make durable (`make_durable` of the folders), together with whatever else
    it wrote meanwhile.
    """
    created: list[list[bool]] = [[] for _ in groups]
    if not any(files for _folder, files in groups):
        return created
    with ExitStack() as stack:
        folder_fds = [stack.enter_context(fs.folder_fd(folder, create=True)) for folder, _files in groups]
        # One temporary name pattern for the batch (`fs.temp_path_for`'s, with a counter in
        # place of fresh random bytes for each file).
        marker = f"{fs.TEMP_MARKER}{os.getpid()}-{secrets.token_hex(4)}"
        planned = [(group, dir_fd, name, data) for group, ((_folder, files), dir_fd) in enumerate(zip(groups, folder_fds, strict=True)) for name, data in files]
        one_device = len({os.fstat(fd).st_dev for fd in folder_fds}) == 1
        start, step = 0, chunk or len(planned)
        while start < len(planned):
            part = planned[start : start + step]
            for (group, _dir_fd, _name, _data), made in zip(part, _create_part(part, start, marker, one_device), strict=True):
                created[group].append(made)
            start, step = start + len(part), step * 2
        if settle:
            fsync_all(folder_fds)
    return created


def _create_part(part: list[tuple[int, int, str, bytes]], first: int, marker: str, one_device: bool) -> list[bool]:
    """`create_in_folders` for (group, folder descriptor, name, data) files numbered from
    `first`: write their temporaries, make them durable together, give each its name; True
    where created. The temporaries left are removed, also on failure."""
    by_syncfs = len(part) >= SYNCFS_FROM and _syncfs() is not None and one_device
    temps: list[tuple[int, str]] = []  # (folder descriptor, temporary)
    renamed: set[int] = set()  # the temporaries (by number) that took their names
    made: list[bool] = []
    try:
        open_fds: list[int] = []
        try:
            for number, (_group, dir_fd, name, data) in enumerate(part, start=first):
                temp = f".{name}{marker}{number:x}"
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
                open_fds.append(fd)
                temps.append((dir_fd, temp))
                fs.write_all(fd, data)
                if by_syncfs:
                    _close_all(open_fds)
                elif len(open_fds) >= FSYNC_CHUNK:
                    fsync_all(open_fds)
                    _close_all(open_fds)
            if by_syncfs:
                _syncfs_or_raise(part[0][1])
            fsync_all(open_fds)
        finally:
            _close_all(open_fds)
        # Each temporary takes its name by one rename that never replaces a file: one
        # directory change where a link and the temporary's removal made two (a batch of
        # 1,000 names: 1,000 calls fewer); a link where the system has no such rename.
        for number, ((dir_fd, temp), (_group, _fd, name, _data)) in enumerate(zip(temps, part, strict=True)):
            done = rename_noreplace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            if done:
                renamed.add(number)
            elif done is None:
                try:
                    os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
                    done = True
                except FileExistsError:
                    done = False
            made.append(done)
    finally:
        for number, (dir_fd, temp) in enumerate(temps):
            if number in renamed:
                continue
            try:
                os.unlink(temp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
    return made


def _close_all(fds: list[int]) -> None:
    while fds:
        os.close(fds.pop())


def make_durable(paths: list[Path]) -> None:
    """Make what was written to each of `paths` (files, and folders whose names changed)
    survive a power cut, together (`fsync_all`). Missing paths are skipped (nothing there)."""
    fds: list[int] = []
    try:
        for path in dict.fromkeys(paths):
            try:
                fds.append(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK))
            except FileNotFoundError:
                continue
        fsync_all(fds)
    finally:
        _close_all(fds)


def rename_noreplace(source: str, target: str, *, src_dir_fd: int, dst_dir_fd: int) -> bool | None:
    """Rename `source` (in the folder `src_dir_fd`) to `target` (in `dst_dir_fd`) unless
    `target` exists, in one call (Linux renameat2 RENAME_NOREPLACE): True when renamed, False
    when `target` exists (nothing done), None where the kernel, C library or file system cannot
    do it (nothing done: the caller checks the name itself, then renames)."""
    code = fs.renameat2(source, target, fs.RENAME_NOREPLACE, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
    if code is None:
        return None
    if code == 0:
        return True
    if code == errno.EEXIST:
        return False
    raise OSError(code, os.strerror(code), source)


def link_files(source: Path, links: list[tuple[str, Path, str]]) -> list[bool | None]:
    """Give files of the folder `source` a second name: each (source name, folder, name) is
    linked unless the name exists. Per link, True when made, False when the name was taken,
    None where a link cannot be made (another file system or mount, a file system without
    links, a file the caller may not link: the caller writes a copy instead). The new names
    are left for the caller to make durable (`make_durable` of the folders)."""
    done: list[bool | None] = []
    with ExitStack() as stack:
        source_fd = stack.enter_context(fs.folder_fd(source))
        folders: dict[Path, int] = {}
        for name, folder, target in links:
            if folder not in folders:
                folders[folder] = stack.enter_context(fs.folder_fd(folder, create=True))
            try:
                os.link(name, target, src_dir_fd=source_fd, dst_dir_fd=folders[folder], follow_symlinks=False)
                done.append(True)
            except FileExistsError:
                done.append(False)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EACCES, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise
                done.append(None)
    return done


def list_names(folder: Path) -> list[str]:
    """The names in `folder` (none when it is missing). Raises NOT_READABLE."""
    try:
        return fs.list_names(folder)
    except FileNotFoundError:
        return []
