"""Many file changes applied all or nothing, made durable together: staging, a journal, renames.

Edge layer: owns the staging folder and journal of one batch inside a toolkit folder. Writing
10,000 files through `fs.create_exclusive` costs two fsyncs each (the file, its folder); a
batch writes every new file into a staging folder without syncing, makes them all durable at
once (one `syncfs(2)` of their file system where Linux has it, else one fsync per file), then
writes a journal naming every change. The journal's durable arrival is the commit point:

- a crash before it leaves only the staging folder, which `recover` deletes: nothing happened;
- a crash after it leaves the journal, which `recover` replays to the end: everything happened.

Every step of the replay is idempotent (a create is a rename that refuses to replace a file,
`renameat2(2)` RENAME_NOREPLACE, whose source is gone once done, or where Linux lacks it a
`link(2)` that finds its own file in place the second time; a replace is a rename whose source
is gone once done; a remove checks the digest it expects), so a crash during recovery is
recovered the same way. The staging
folder and journal are named like `fs.temp_path_for`'s temporaries (`.<name>.tmp-<pid>-<hex>`)
so scanners, watchers and the project's .gitignore pass over them. A batch has three names,
and `recover` knows each: its staging folder `.batch.tmp-<pid>-<hex>`, its journal (that name
plus `.journal`), and the journal's own temporary while it is written
(`..batch.tmp-<pid>-<hex>.journal.tmp-<pid>-<hex>`, never the commit point: dropped).

The caller holds the lock that keeps other writers of the folder out, both while committing
and while recovering; readers that see a batch's names take that lock and call `recover`.
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from moss_files.foundation import fs
from moss_files.foundation.errors import Conflict, InvalidDocument

BATCH_PREFIX = ".batch"
JOURNAL_SUFFIX = ".journal"
_STAGED = BATCH_PREFIX + ".tmp-"  # a staging folder, or (with JOURNAL_SUFFIX) a journal
_JOURNAL_TEMP = "." + _STAGED  # the temporary a journal is written to before its rename
_CREATE, _REPLACE, _REMOVE = "create", "replace", "remove"
LIST_FROM = 256  # new files into one folder from which `commit` lists it rather than stat each name


@dataclass(frozen=True, slots=True)
class Change:
    """One planned change: `op` on `target` (relative to the batch's folder)."""

    op: str
    target: PurePosixPath
    data: bytes | None = None  # the new bytes (create, replace)
    expected: str | None = None  # the digest the target must still have (replace, remove)
    mode: int | None = None  # the new file's permission bits


class FileBatch:
    """Changes to files below `folder`, collected, then committed all or nothing."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.changes: list[Change] = []
        self._new_mode = 0o666 & ~fs._umask()  # asked once: each ask is two umask(2) calls
        # After `commit`: each written file's (inode, mtime) as staged, and the mtime of the
        # journal, written after every staged file. A file that still has its staged inode and
        # mtime, older than the journal's, holds the staged bytes: any write once it was in
        # place would have moved its mtime to the journal's time or later (see `written`).
        self.staged: dict[PurePosixPath, tuple[int, int]] = {}
        self.journal_mtime_ns: int | None = None

    def create(self, target: PurePosixPath, data: bytes) -> None:
        """Add a new file; the commit fails (Conflict ALREADY_EXISTS) if `target` exists."""
        self.changes.append(Change(_CREATE, target, data, None, self._new_mode))

    def replace(self, target: PurePosixPath, data: bytes, expected_digest: str) -> None:
        """Rewrite a file (keeping its mode) that must still hold the bytes whose digest is
        `expected_digest`."""
        try:
            mode = stat.S_IMODE(os.lstat(self.folder.joinpath(*target.parts)).st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~fs._umask()
        self.changes.append(Change(_REPLACE, target, data, expected_digest, mode))

    def remove(self, target: PurePosixPath, expected_digest: str) -> None:
        """Delete a file that must still hold the bytes whose digest is `expected_digest`."""
        self.changes.append(Change(_REMOVE, target, None, expected_digest))

    def commit(self) -> None:
        """Apply every change, or none. Raises Conflict (STALE_WRITE, ALREADY_EXISTS) before
        anything is visible when a target is not as planned; nothing is left behind then."""
        if not self.changes:
            return
        token = f"{BATCH_PREFIX}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
        journal = token + JOURNAL_SUFFIX
        # The journal is written to its temporary (a name `recover` drops) with the staged
        # files, so that the one flush of the file system makes both durable; its rename is
        # the commit point, made durable by one fsync of the folder.
        journal_temp = fs.temp_path_for(self.folder / journal).name
        entries: list[dict[str, object]] = []
        with fs.folder_fd(self.folder, create=True) as base_fd:
            try:
                os.mkdir(token, 0o700, dir_fd=base_fd)
                staging_fd = os.open(token, fs.FOLDER_NOFOLLOW, dir_fd=base_fd)
                try:
                    self._stage(staging_fd, entries)
                    _write_new(base_fd, journal_temp, _render_journal(entries))
                    if not _make_durable(staging_fd, [str(entry["staged"]) for entry in entries if "staged" in entry]):
                        _fsync_in(base_fd, journal_temp)  # flushed file by file: the journal too
                    os.fsync(staging_fd)
                finally:
                    os.close(staging_fd)
                self._check()
            except BaseException:
                _unlink_quietly(base_fd, journal_temp)
                fs.remove_flat_folder(base_fd, token)
                raise
            # The commit point: from here on the batch happens, if need be by `recover`.
            os.rename(journal_temp, journal, src_dir_fd=base_fd, dst_dir_fd=base_fd)
            os.fsync(base_fd)
            self.journal_mtime_ns = os.stat(journal, dir_fd=base_fd, follow_symlinks=False).st_mtime_ns
        _replay(self.folder, token, entries)

    def written(self, target: PurePosixPath, info: os.stat_result) -> bool:
        """Whether `info` (an lstat of `target` after the commit) proves the file holds the
        bytes this batch wrote there: the staged file's inode, with its staged mtime, which is
        older than the journal's. A later write in place moves the mtime to the time of that
        write (the journal's or after); a file put there by rename is another inode."""
        staged = self.staged.get(target)
        bound = self.journal_mtime_ns
        return staged is not None and bound is not None and staged == (info.st_ino, info.st_mtime_ns) and info.st_mtime_ns < bound

    def _stage(self, staging_fd: int, entries: list[dict[str, object]]) -> None:
        for number, change in enumerate(self.changes):
            entry: dict[str, object] = {"op": change.op, "target": str(change.target)}
            if change.expected is not None:
                entry["expected"] = change.expected
            if change.data is not None:
                name = f"{number:06d}"
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, change.mode or 0o600, dir_fd=staging_fd)
                try:
                    fs.write_all(fd, change.data)
                    written = os.fstat(fd)
                finally:
                    os.close(fd)
                self.staged[change.target] = (written.st_ino, written.st_mtime_ns)
                entry["staged"] = name
            entries.append(entry)

    def _check(self) -> None:
        # Under the caller's lock only hand edits can still change a target; most land while
        # the caller planned and are caught here, before anything is visible.
        removed: set[str] = set()
        # A folder many new files go to is listed once rather than asked for each name: one
        # read of its entries costs less than a stat a file from a few hundred files on.
        creates_in = Counter(str(change.target).rpartition("/")[0] for change in self.changes if change.op == _CREATE)
        listed: dict[str, set[str]] = {}
        with ExitStack() as stack:
            folders: dict[str, int | None] = {}
            for change in self.changes:
                target = str(change.target)
                if change.op != _CREATE:
                    path = self.folder.joinpath(*change.target.parts)
                    if fs.read_snapshot(path).digest != change.expected:
                        raise Conflict("file changed since it was read; nothing was written", code="STALE_WRITE", path=str(path))
                    if change.op == _REMOVE:
                        removed.add(target)
                    continue
                parent, _, name = target.rpartition("/")
                if parent not in folders:
                    try:
                        folders[parent] = stack.enter_context(fs.folder_fd(self.folder.joinpath(*change.target.parent.parts)))
                    except FileNotFoundError:
                        folders[parent] = None  # made when the batch is applied
                dir_fd = folders[parent]
                if dir_fd is None or target in removed:
                    continue
                if creates_in[parent] >= LIST_FROM:
                    if parent not in listed:
                        listed[parent] = set(os.listdir(dir_fd))
                    taken = name in listed[parent]
                else:
                    taken = _exists(dir_fd, name)
                if taken:
                    path = self.folder.joinpath(*change.target.parts)
                    raise Conflict(f"{change.target} exists already; nothing was written", code="ALREADY_EXISTS", path=str(path))


def pending(folder: Path) -> bool:
    """True when `folder` holds a batch's staging folder, journal or journal temporary (in
    progress or crashed)."""
    try:
        with os.scandir(folder) as iterator:
            return any(entry.name.startswith((_STAGED, _JOURNAL_TEMP)) for entry in iterator)
    except (FileNotFoundError, NotADirectoryError):
        return False


def recover(folder: Path) -> int:
    """Finish every committed batch in `folder` and drop every uncommitted one, with each of
    its names (hold the writers' lock). Returns how many batches were finished."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.name.startswith((_STAGED, _JOURNAL_TEMP)))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    finished = 0
    for name in names:
        if name.startswith(_JOURNAL_TEMP):
            # A journal killed before its rename: the batch never reached its commit point.
            # (Under the writers' lock no live batch is writing one.)
            with fs.folder_fd(folder) as base_fd:
                os.unlink(name, dir_fd=base_fd)
                os.fsync(base_fd)
        elif name.endswith(JOURNAL_SUFFIX):
            token = name[: -len(JOURNAL_SUFFIX)]
            entries = _parse_journal(fs.read_bytes(folder / name))
            if entries is None:  # a torn journal was never renamed into place; cannot happen
                continue
            _replay(folder, token, entries)
            finished += 1
        elif name + JOURNAL_SUFFIX not in names:
            with fs.folder_fd(folder) as base_fd:
                fs.remove_flat_folder(base_fd, name)
                os.fsync(base_fd)
    return finished


def _replay(folder: Path, token: str, entries: list[dict[str, object]]) -> None:
    """Apply a committed batch's changes, idempotently; then drop its staging and journal."""
    with ExitStack() as stack:
        base_fd = stack.enter_context(fs.folder_fd(folder))
        try:
            staging_fd: int | None = os.open(token, fs.FOLDER_NOFOLLOW, dir_fd=base_fd)
        except FileNotFoundError:
            staging_fd = None
        if staging_fd is not None:
            stack.callback(os.close, staging_fd)
        folders: dict[str, int] = {}
        clashes: list[str] = []

        def folder_of(parent: str) -> int:
            if parent not in folders:
                where = folder.joinpath(*parent.split("/")) if parent else folder
                folders[parent] = stack.enter_context(fs.folder_fd(where, create=True))
            return folders[parent]

        for entry in entries:
            target = str(entry["target"])
            parent, _, name = target.rpartition("/")
            parts = target.split("/")
            if target.startswith("/") or "" in parts or "." in parts or ".." in parts:
                raise InvalidDocument(
                    f"the batch journal names a place outside its folder: {target}", code="SCHEMA_ERROR", path=str(folder / (token + JOURNAL_SUFFIX))
                )
            dir_fd = folder_of(parent)
            staged = str(entry.get("staged"))
            if entry["op"] == _REMOVE:
                current = fs.read_snapshot(folder.joinpath(*target.split("/")))
                if current.exists and current.digest == entry.get("expected"):
                    os.unlink(name, dir_fd=dir_fd)
                continue
            if staging_fd is None:
                continue  # done before a crash
            # A staged file that is gone was moved into place before a crash: done. (Asked
            # only when the move fails, not of every file.)
            try:
                if entry["op"] == _REPLACE:
                    os.rename(staged, name, src_dir_fd=staging_fd, dst_dir_fd=dir_fd)
                    continue
                if fs.move_new(staged, name, staging_fd, dir_fd):
                    continue
                os.link(staged, name, src_dir_fd=staging_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                if _exists(staging_fd, staged):
                    raise
                continue
            except FileExistsError:
                # Another file holds the place, or the staged file itself: a replay (of an
                # older build, which linked then unlinked) cut between its two steps.
                mine = os.stat(staged, dir_fd=staging_fd, follow_symlinks=False)
                theirs = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
                    clashes.append(target)  # a hand-made file took the place: it stays
                    continue
            os.unlink(staged, dir_fd=staging_fd)
        for dir_fd in folders.values():
            os.fsync(dir_fd)
        kept = None
        if staging_fd is not None and clashes:
            # The batch's copies of the clashing files stay, under a name people see (not a
            # temporary one), and the journal goes: the batch is done, and says what it kept.
            kept = token.replace(f"{BATCH_PREFIX}.tmp-", f"{BATCH_PREFIX}-kept-", 1)
            os.rename(token, kept, src_dir_fd=base_fd, dst_dir_fd=base_fd)
        elif staging_fd is not None:
            fs.remove_flat_folder(base_fd, token)
        os.unlink(token + JOURNAL_SUFFIX, dir_fd=base_fd)
        os.fsync(base_fd)
    if kept is not None:
        raise Conflict(
            f"{len(clashes)} file(s) appeared in the batch's places while it was applied; they were kept, and the batch's copies are in {kept}",
            code="ALREADY_EXISTS",
            path=str(folder / kept),
            details={"paths": clashes},
        )


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


_COMPACT = json.JSONEncoder(separators=(",", ":"))  # one encoder: `json.dumps` with separators makes one a call


def _render_journal(entries: list[dict[str, object]]) -> bytes:
    lines = [json.dumps({"batch": 1, "changes": len(entries)})]
    lines.extend(map(_COMPACT.encode, entries))
    return ("\n".join(lines) + "\n").encode("utf-8")


def _parse_journal(data: bytes) -> list[dict[str, object]] | None:
    lines = data.decode("utf-8").splitlines()
    if not lines:
        return None
    header = json.loads(lines[0])
    entries = [json.loads(line) for line in lines[1:]]
    return entries if header.get("changes") == len(entries) else None


def _make_durable(staging_fd: int, names: list[str]) -> bool:
    """Flush the staged files to disk: one syncfs(2) of their file system where the C library
    has it (Linux; returns True: every file written so far on it is durable), else one fsync
    per file (returns False)."""
    if _syncfs(staging_fd):
        return True
    for name in names:
        _fsync_in(staging_fd, name)
    return False


def _fsync_in(dir_fd: int, name: str) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_new(dir_fd: int, name: str, data: bytes) -> None:
    """Write a new file `name` in `dir_fd` (not flushed: the caller does)."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        fs.write_all(fd, data)
    finally:
        os.close(fd)


def _unlink_quietly(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


_libc: list[object] = []


def _syncfs(fd: int) -> bool:
    if not _libc:
        try:
            import ctypes  # here: every reader of the store imports this module, few commit a batch

            _libc.append(getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None))
        except OSError:
            _libc.append(None)
    call = _libc[0]
    if call is None:
        return False
    return call(fd) == 0  # type: ignore[operator]
