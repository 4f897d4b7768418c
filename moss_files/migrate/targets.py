"""The workspace side of a migration: what it holds already (files imported before, found by
their `imported_from` and `source_id` keys), merge conflicts in the folders it would write,
the writes of a plan, the report file, and the removal of moved sources.

Edge layer: owns no folder of its own but `.moss/migrations/`; it writes the other kinds'
files only as a plan says, each new file exclusively (never replacing one) and durably through
`foundation.fs`, under the writer lock of the kind when the caller holds it. A plan is all or
nothing: when a write fails, the files this run created are removed again, and the logs are
appended only once every file is in place.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from moss_files.foundation import conflicted, conflicts, document, fs, structured
from moss_files.foundation.errors import Conflict, InvalidDocument, MossError
from moss_files.migrate.model import CREATE, Write, provenance_of

PROGRESS_EVERY = 250  # report progress every this many files (and at the end)
STAGING_DIR = Path(".moss") / "run"  # per machine, git-ignored: where new files wait for their commit


def refuse_conflicts(root: Path, folders: Sequence[str]) -> None:
    """Raise MERGE_CONFLICT naming the first file under `folders` (relative to the root) that
    holds git conflict markers, and listing them all: a migration never runs into a merge
    that is not finished."""
    found = conflicted.find_conflicted(root, tuple(folder for folder in folders if (root / folder).exists()))
    if found:
        path, line = found[0]
        error = conflicts.conflict_error(path.relative_to(root).as_posix(), line)
        error.details["files"] = [f"{p.relative_to(root).as_posix()}:{n}" for p, n in found]
        raise error


def provenance_index(root: Path, folders: Mapping[str, str], imported_from: str) -> tuple[dict[tuple[str, str], str], set[str]]:
    """`{(kind, old id): file}` of the files under `folders` (kind -> folder, relative to the
    root; files directly in it) imported from `imported_from`, and every file there. A file
    that names a source id but cannot be read stops the migration (it could be an earlier
    import; going on would duplicate it)."""
    index: dict[tuple[str, str], str] = {}
    existing: set[str] = set()
    for kind, folder in folders.items():
        base = root / folder
        if not base.is_dir():
            continue
        for path in fs.iter_files(base):
            if path.parent != base:
                continue
            relpath = path.relative_to(root).as_posix()
            existing.add(relpath)
            data = fs.read_bytes(path)
            if b"source_id" not in data:
                continue
            found = provenance_of(document.parse_bytes(data, relpath).meta)
            if found is not None and found[0] == imported_from:
                index[(kind, found[1])] = relpath
    return index, existing


def file_index(root: Path, relpath: str, kind: str, imported_from: str) -> dict[tuple[str, str], str]:
    """`{(kind, old id): relpath}` for one file imported from `imported_from` (project.md)."""
    path = root / relpath
    if not path.is_file():
        return {}
    found = provenance_of(fs.read_document(path).meta)
    return {(kind, found[1]): relpath} if found is not None and found[0] == imported_from else {}


def record_ids(root: Path, relpath: str) -> set[str] | None:
    """The `id`s of the records a JSON Lines file holds (a task's comments), or None when
    there is no such file. Lines that are not JSON objects are passed over: their reader
    reports them."""
    path = root / relpath
    if not path.exists() and not path.is_symlink():
        return None
    found: set[str] = set()
    for line in fs.read_bytes(path).splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("id"), str):
            found.add(record["id"])
    return found


def logged_sources(root: Path, relpaths: Sequence[str], imported_from: str) -> set[str]:
    """Old ids of the events the JSON Lines logs `relpaths` hold from `imported_from` (in their
    payload)."""
    found: set[str] = set()
    for relpath in relpaths:
        path = root / relpath
        if not path.exists() and not path.is_symlink():
            continue
        for line in fs.read_bytes(path).splitlines():
            if b"source_id" not in line:
                continue
            try:
                payload = structured.loads_json(line).get("payload") or {}
            except (ValueError, AttributeError, InvalidDocument):
                continue  # a torn line: the log's reader reports it
            if isinstance(payload, dict) and payload.get("imported_from") == imported_from and payload.get("source_id") is not None:
                found.add(str(payload["source_id"]))
    return found


def commit(root: Path, writes: Sequence[Write], progress: Callable[[int, int], None] | None = None) -> None:
    """Make a plan's writes: new files first, then replacements of files that must still hold
    what was read, then appends. On any failure before the appends, the files created here are
    removed and the error is raised: the workspace is as it was.

    New files are staged, then committed: each is written under a temporary name in
    `.moss/run/` (per machine, git-ignored), the file system is synced once, then each is
    moved into its place by a rename that never replaces a file (renameat2 RENAME_NOREPLACE;
    where the kernel lacks it, link(2), which fails when the name exists, then unlink; a
    folder that does not exist yet is moved whole), and each folder that gained files is
    fsynced. That is as durable as creating each file on its
    own, at a fraction of the cost for thousands of files; a crash while staging leaves only
    the staging folder, which the next run clears.

    Raises Conflict ALREADY_EXISTS (a new file's place was taken meanwhile) or STALE_WRITE (a
    file changed since it was read).
    """
    creates = [write for write in writes if write.mode == CREATE]
    replaces = [write for write in writes if write.mode == "replace"]
    appends = [write for write in writes if write.mode == "append"]
    total = len(writes)
    created: list[tuple[str, bytes]] = []
    replaced: list[tuple[Path, bytes, bytes | None]] = []
    try:
        if creates:
            _create_all(root, creates, created, progress, total)
        for write in replaces:
            path = root / write.path
            with fs.locked(path):
                snapshot = fs.read_snapshot(path)
                if snapshot.data != write.expected:
                    raise Conflict(f"{write.path} changed since it was read; nothing of this source was kept", code="STALE_WRITE", path=write.path)
                if snapshot.data is None:
                    if not fs.create_exclusive(path, write.data):
                        raise Conflict(f"{write.path} appeared while the migration ran", code="ALREADY_EXISTS", path=write.path)
                else:
                    fs.write_if_unchanged(snapshot, write.data)
                replaced.append((path, write.data, write.expected))
    except BaseException:
        _undo(root, created, replaced)
        raise
    for write in appends:
        fs.append_line(root / write.path, write.data)
    if progress is not None and total:
        progress(total, total)


def _create_all(root: Path, creates: Sequence[Write], created: list[tuple[str, bytes]], progress: Callable[[int, int], None] | None, total: int) -> None:
    """Stage every new file, then move each into place (see `commit`); `created` collects the
    files placed, for `_undo`.

    Each file is staged under its own name, in a staging folder of its own for each folder
    the files go to, so that a folder that does not exist yet (the board of a first
    migration) is moved into place whole: one rename for all its files, where each file's
    rename would cost the kernel as much again as writing it (20 us). It is the same rename
    that never replaces (an existing folder, even an empty one, is not replaced), and the
    same durability: the folder's entries were synced with its files."""
    _clear_stale_staging(root)
    staging = root / STAGING_DIR / f"migrate-{os.getpid()}-{secrets.token_hex(4)}"
    by_folder: dict[str, list[Write]] = {}  # by the folder's path as the plan spells it: no Path made per file
    for write in creates:
        by_folder.setdefault(write.path.rpartition("/")[0], []).append(write)
    with ExitStack() as stack:
        stage_fd = stack.enter_context(fs.folder_fd(staging, create=True))
        try:
            staged: list[int] = []  # the staging folder of each folder in `by_folder`, in its order
            number = 0
            for index, writes in enumerate(by_folder.values()):
                os.mkdir(str(index), 0o777, dir_fd=stage_fd)
                staged.append(os.open(str(index), fs.FOLDER_NOFOLLOW, dir_fd=stage_fd))
                stack.callback(os.close, staged[-1])
                for write in writes:
                    try:
                        fd = os.open(
                            write.path.rpartition("/")[2], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=staged[-1]
                        )
                    except FileExistsError:
                        raise _appeared(write.path) from None  # the plan names it twice: as the second move would find
                    try:
                        fs.write_all(fd, write.data)
                    finally:
                        os.close(fd)
                    number += 1
                    if progress is not None and number % PROGRESS_EVERY == 0:
                        progress(number // 2, total)
            _sync_filesystem(stage_fd)
            changed: list[int] = []  # the folders that gained an entry, to fsync
            placed = 0
            for index, (folder, writes) in enumerate(by_folder.items()):
                parent, _slash, name = folder.rpartition("/")
                parent_fd = stack.enter_context(fs.folder_fd(root / parent, create=True)) if name else None
                if parent_fd is not None and fs.renameat2(str(index), name, fs.RENAME_NOREPLACE, src_dir_fd=stage_fd, dst_dir_fd=parent_fd) == 0:
                    changed.append(parent_fd)
                    created.extend((write.path, write.data) for write in writes)
                    placed += len(writes)
                    if progress is not None:
                        progress(len(creates) // 2 + placed // 2, total)
                    continue
                folder_fd = stack.enter_context(fs.folder_fd(root / folder, create=True))
                changed.append(folder_fd)
                for write in writes:
                    file_name = write.path.rpartition("/")[2]
                    try:
                        if not fs.move_new(file_name, file_name, staged[index], folder_fd):
                            os.link(file_name, file_name, src_dir_fd=staged[index], dst_dir_fd=folder_fd, follow_symlinks=False)
                    except FileExistsError:
                        raise _appeared(write.path) from None
                    created.append((write.path, write.data))
                    placed += 1
                    if progress is not None and placed % PROGRESS_EVERY == 0:
                        progress(len(creates) // 2 + placed // 2, total)
            for folder_fd in changed:
                os.fsync(folder_fd)
        finally:  # what is left: files never placed, the staged names of files linked, folders emptied
            _empty_staging(stage_fd)
    try:
        staging.rmdir()
    except OSError:
        pass


def _appeared(path: str) -> Conflict:
    return Conflict(f"{path} appeared while the migration ran; nothing of this source was kept", code="ALREADY_EXISTS", path=path)


def _empty_staging(fd: int) -> None:
    """Remove what the staging folder `fd` holds: files, and folders of files."""
    for name in os.listdir(fd):
        try:
            os.unlink(name, dir_fd=fd)
        except IsADirectoryError:
            fs.remove_flat_folder(fd, name)


def _sync_filesystem(fd: int) -> None:
    """Make everything written so far on the file system holding `fd` durable: one syncfs(2)
    (Linux) instead of an fsync per file, which is what makes thousands of new files cheap;
    sync(2) where syncfs is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syncfs(fd) == 0:
            return
    except (OSError, AttributeError):
        pass
    os.sync()


def _clear_stale_staging(root: Path) -> None:
    """Remove staging folders of migrations whose process is gone (a crash while staging)."""
    base = root / STAGING_DIR
    try:
        names = os.listdir(base)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        parts = name.split("-")
        if len(parts) != 3 or parts[0] != "migrate" or not parts[1].isdigit() or fs.process_alive(int(parts[1])):
            continue
        folder = base / name
        if folder.is_symlink() or not folder.is_dir():
            continue
        with fs.folder_fd(folder) as fd:
            _empty_staging(fd)
        folder.rmdir()


def _undo(root: Path, created: Sequence[tuple[str, bytes]], replaced: Sequence[tuple[Path, bytes, bytes | None]]) -> None:
    """Take back what a failed commit wrote (`created`: new files by path relative to the
    root), leaving any file someone else changed since."""
    for path, data, old in reversed(replaced):
        with fs.locked(path):
            snapshot = fs.read_snapshot(path)
            if snapshot.data != data:
                continue
            if old is None:
                fs.remove(path)
            else:
                fs.write_if_unchanged(snapshot, old)
    for relpath, data in reversed(created):
        path = root / relpath
        try:
            if fs.read_bytes(path) == data:
                fs.remove(path)
        except (MossError, OSError):
            continue


def write_report(root: Path, relpath: str, data: Mapping[str, Any]) -> str:
    """Write the report file (a new file; `-2`, `-3`, … when a run in the same second wrote one);
    returns the path written, relative to the root."""

    def body() -> Iterator[bytes]:  # in parts: a report of a hundred thousand items is tens of MB
        for block in structured.json_blocks(data):
            yield block.encode("utf-8")
        yield b"\n"

    candidate = relpath
    for number in range(2, 100):
        if fs.create_exclusive(root / candidate, body):
            return candidate
        candidate = relpath.removesuffix(".json") + f"-{number}.json"
    raise Conflict("too many reports in the same second", code="ALREADY_EXISTS", path=relpath)


def remove_sources(root: Path, paths: Sequence[Path], expected: Mapping[Path, bytes]) -> list[str]:
    """Remove moved source files, each only if it still holds the bytes that were migrated;
    returns what was removed (as shown)."""
    removed = []
    for path in paths:
        if fs.read_bytes(path) != expected[path]:
            raise Conflict("the source changed since it was migrated; it is left in place", code="STALE_WRITE", path=str(path))
        fs.remove(path)
        try:
            removed.append(path.relative_to(root).as_posix())
        except ValueError:
            removed.append(str(path))
    return removed
