"""Capsule files under `.moss/capsules/`: find, read, scan, create, rewrite, move, remove.

Edge layer: owns the capsule folder; all bytes go through `fs` (atomic writes, locks). Layout,
relative to `.moss/capsules/` (names encoded by `capsule.encode_component`, so a file name
never holds a separator or `..`, and two names that normalize differently never share a file):

    <workspace>/<name>.md          a live named capsule: the file name IS the name slot
    <workspace>/@<ID>.md           a live unnamed capsule
    <workspace>/deleted/<ID>.md    a soft-deleted capsule (its slot is free for a new one)

Uniqueness of names among live capsules holds by construction: one name, one slot file, and
`fs.create_exclusive` never replaces a file, even when two processes race. Writers also hold
one store-wide lock (`.moss/.capsules.lock`) so multi-file operations (delete moves a file,
import writes many) never interleave. Readers take no lock: every file is replaced atomically.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from moss_files.capsules import model as core
from moss_files.capsules.model import Capsule, CapsuleKey
from moss_files.foundation import batch, document, fs
from moss_files.foundation.errors import Conflict, InvalidDocument, MossError, NotFound

CAPSULES_DIR = PurePosixPath(".moss/capsules")
MAX_FILE_BYTES = core.MAX_FILE_BYTES
STORE_LOCK_TIMEOUT = 30.0
_ID_LINE = re.compile(rb"(?mi)^['\"]?id['\"]?[ \t]*:")


class StoredCapsule(NamedTuple):
    """A capsule with the file it was read from and that file's bytes as read."""

    capsule: Capsule
    path: Path
    relpath: PurePosixPath  # relative to the capsules folder
    snapshot: fs.Snapshot


class Scan(NamedTuple):
    """Every capsule found, and every file that could not be read as one (never skipped)."""

    capsules: tuple[StoredCapsule, ...]
    problems: tuple[MossError, ...]


class Listing(NamedTuple):
    """A folder listing: capsule files and stray entries, relative to the capsules folder
    (`<workspace>/<file>`, `<workspace>/deleted/<file>`, or a stray's own place)."""

    files: list[str]
    strays: list[str]


class CapsuleStore:
    """The capsule files of one workspace root (the folder holding `.moss/`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.base = root / CAPSULES_DIR

    # ----------------------------------------------------------------- locations

    def path_of(self, relpath: PurePosixPath) -> Path:
        return self.base.joinpath(*relpath.parts)

    def display(self, path: Path) -> str:
        """A path relative to the workspace root, for messages."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store-wide writer lock, finishing or dropping a batch (an import) that a
        crashed writer left first. Raises Conflict LOCK_TIMEOUT."""
        with fs.locked(self.base, timeout=STORE_LOCK_TIMEOUT):
            batch.recover(self.base)
            yield

    def settle(self) -> None:
        """Before reading: when a batch's staging or journal is present (an import running,
        or one that crashed), wait for the writer lock and recover, so that a reader sees an
        import whole or not at all. Costs one listing of the capsules folder otherwise."""
        if batch.pending(self.base):
            with self.writing():
                pass

    # ----------------------------------------------------------------- reading

    def read(self, path: Path) -> StoredCapsule | None:
        """The capsule in `path`, or None when there is no such file.

        Raises InvalidDocument (with file and line) when the file is not a valid capsule.
        """
        snapshot = fs.read_snapshot(path, max_bytes=MAX_FILE_BYTES)
        if snapshot.data is None:
            return None
        return self._parse(path, snapshot)

    def _parse(self, path: Path, snapshot: fs.Snapshot) -> StoredCapsule:
        assert snapshot.data is not None
        relpath = PurePosixPath(path.relative_to(self.base).as_posix())
        shown = self.display(path)
        doc = document.parse_bytes(snapshot.data, shown, max_bytes=MAX_FILE_BYTES)
        # The file's time stands in only for missing times; skip the stat when none is missing.
        keys = ("created_at", "updated_at", *(("deleted_at",) if len(relpath.parts) == 3 else ()))
        needs_mtime = any(document.find_key(doc.meta, key) is None for key in keys)
        mtime_ms = _mtime_ms(path) if needs_mtime else 0
        capsule = core.parse_capsule(doc, relpath, mtime_ms=mtime_ms, path=shown)
        return StoredCapsule(capsule, path, relpath, snapshot)

    def read_slot(self, workspace_norm: str, name_norm: str) -> StoredCapsule | None:
        """The capsule in a name's slot file (live or hand-marked deleted), if any."""
        self.settle()
        for folder in self.workspace_folders(workspace_norm):
            found = self.read(folder / core.slot_filename(name_norm))
            if found is None and name_norm in core.WINDOWS_RESERVED:
                found = self.read(folder / f"{name_norm}{core.SUFFIX}")  # named before the escape
            if found is not None:
                return found
        return None

    def workspace_folders(self, workspace_norm: str) -> list[Path]:
        """A workspace's folder, and the one it had before the Windows escape (`nul/` for
        `%6Eul/`) when that name is reserved: files there are found until they move."""
        folders = [self.base / core.workspace_dir(workspace_norm)]
        if workspace_norm in core.WINDOWS_RESERVED:
            folders.append(self.base / workspace_norm)
        return folders

    def files(self, workspace_norm: str | None = None, *, include_deleted: bool = True) -> tuple[list[Path], list[MossError]]:
        """Candidate capsule files (sorted), and entries that have no business in the folder."""
        found = self.listing(workspace_norm, include_deleted=include_deleted)
        base = self.base
        return [base / relpath for relpath in found.files], [_stray(self, base / relpath) for relpath in found.strays]

    def listing(self, workspace_norm: str | None = None, *, include_deleted: bool = True, ordered: bool = True) -> Listing:
        """The capsule files of one workspace (or all) and the stray entries beside them, as
        names relative to the capsules folder, in the order `files` gives them (unless not
        `ordered`: then as the folders list them). Reads folder entries only (their types come
        with the listing): no file is opened or stat'ed."""
        self.settle()
        entries = _sorted_entries if ordered else _entries
        if workspace_norm is not None:
            folders = [folder.relative_to(self.base).as_posix() for folder in self.workspace_folders(workspace_norm)]
            for folder in folders:
                fs.check_confined(self.base / folder)
            strays: list[str] = []
        else:
            fs.check_confined(self.base)
            folders, strays = [], []
            for entry in entries(str(self.base)):
                name = entry.name
                if entry.is_dir(follow_symlinks=False):
                    # A dot-folder that is not ours is listed as a workspace: its files are
                    # then strays or capsules nobody put there, either way reported.
                    if not fs.is_temporary(Path(name)):
                        folders.append(name)
                elif not _ignored(name):
                    strays.append(name)
        files: list[str] = []
        add_file, add_stray = files.append, strays.append
        for folder in folders:
            prefix = folder + "/"
            for entry in entries(f"{self.base}/{folder}"):
                name = entry.name
                # The common case first: a capsule file (the checks of the branches below).
                if name.endswith(core.SUFFIX) and not name.startswith(".") and entry.is_file(follow_symlinks=False):
                    add_file(prefix + name)
                elif _ignored(name):
                    continue
                elif name == core.DELETED_DIR and entry.is_dir(follow_symlinks=False):
                    if include_deleted:
                        inner_prefix = prefix + name + "/"
                        for inner in entries(f"{self.base}/{folder}/{name}"):
                            if _ignored(inner.name):
                                continue
                            (add_file if _is_capsule_entry(inner) else add_stray)(inner_prefix + inner.name)
                else:
                    add_stray(prefix + name)
        return Listing(files, strays)

    def census(self, workspace_norm: str | None = None, *, include_deleted: bool = True) -> tuple[int, bool]:
        """What `listing` tells of one workspace (or all) without its names: how many capsule
        files there are, and whether any stray entry lies beside them. Each folder's part is
        kept in `.moss/cache/` (see `FolderCensus`) and used again while the folder is the same
        one, unchanged since (its ctime), so a large store is not listed on every call."""
        self.settle()
        census = FolderCensus(self)
        strays = False
        if workspace_norm is not None:
            folders = [folder.relative_to(self.base).as_posix() for folder in self.workspace_folders(workspace_norm)]
            for folder in folders:
                fs.check_confined(self.base / folder)
        else:
            fs.check_confined(self.base)
            top = census.folder("")
            folders, strays = list(top.folders), top.strays
        files = 0
        for folder in folders:
            part = census.folder(folder)
            files, strays = files + part.files, strays or part.strays
            if include_deleted and part.folders:
                inner = census.folder(f"{folder}/{core.DELETED_DIR}")
                files, strays = files + inner.files, strays or inner.strays
        census.save()
        return files, strays

    def scan(self, workspace_norm: str | None = None, *, include_deleted: bool = True) -> Scan:
        """Read every capsule of one workspace (or all), reporting files that fail to parse."""
        paths, problems = self.files(workspace_norm, include_deleted=include_deleted)
        capsules: list[StoredCapsule] = []
        for path in paths:
            try:
                stored = self.read(path)
            except MossError as err:
                problems.append(err)
                continue
            if stored is not None:
                capsules.append(stored)
        return Scan(tuple(capsules), tuple(problems))

    def keys(self) -> tuple[list[CapsuleKey], list[MossError]]:
        """The key (id, name slot, deleted) of every capsule file, deleted ones included, and
        every problem: what `scan(None, include_deleted=True)` finds, read through the key
        cache (`index.capsule_keys`), so that only files the cache cannot vouch for are parsed.
        Keeps the cache up to date. A bulk writer's view: it holds no capsule's text."""
        from moss_files.index import capsule_keys as key_cache  # sqlite3: only for bulk writers

        listing = self.listing(None, include_deleted=True)
        problems: list[MossError] = [_stray(self, self.base / relpath) for relpath in listing.strays]
        cache = key_cache.KeyCache(self.root)
        cached = cache.rows()
        now_ns = time.time_ns()  # before any stat: a file changed after it is racy, never trusted
        found: list[CapsuleKey] = []
        learned: list[key_cache.Learned] = []
        folders: dict[str, int | None] = {}  # folder (relative) -> its descriptor, None: unusable
        cached_row, lstat, usable, key_of, add = cached.get, os.lstat, key_cache.usable, key_cache.key_of, found.append
        try:
            for relpath in listing.files:
                folder, _, name = relpath.rpartition("/")
                if folder not in folders:
                    try:
                        folders[folder] = fs.open_folder(self.base / folder)
                    except (OSError, MossError):
                        folders[folder] = None  # its files take the path of `scan`, with its errors
                dir_fd = folders[folder]
                entry = cached_row(relpath)
                if entry is not None and entry[1] is not None and dir_fd is not None:
                    # The common case of a large store, first and alone: a file the cache
                    # vouches for by its stat. Any other outcome takes the full path below,
                    # which stats the file again.
                    try:
                        st = lstat(name, dir_fd=dir_fd)
                    except FileNotFoundError:
                        continue  # gone since the listing, as `scan` finds it gone
                    except OSError:
                        pass
                    else:
                        if usable(entry, st.st_ctime_ns, st.st_mtime_ns):
                            add(key_of(entry))
                            continue
                # A file the cache holds no signature for is read: its racy window is judged from
                # a time taken just before its stat rather than the start of `keys`, so that a
                # file an import wrote a second before this one began (racy at `now_ns`) is
                # often stored with its signature, and the next `keys` need not read it again.
                seen_ns = time.time_ns() if entry is None or entry[1] is None else now_ns
                before: os.stat_result | None = None
                data: bytes | None = None
                if dir_fd is not None:
                    try:
                        before = os.lstat(name, dir_fd=dir_fd)
                        if key_cache.usable(entry, before.st_ctime_ns, before.st_mtime_ns):
                            assert entry is not None
                            found.append(key_cache.key_of(entry))
                            continue
                        data, info = fs.read_in(dir_fd, name, max_bytes=MAX_FILE_BYTES)
                    except FileNotFoundError:
                        continue  # gone since the listing, as `scan` finds it gone
                    except (OSError, MossError):
                        before = data = None  # read it as `scan` does, for the same answer or error
                path = self.base / relpath
                if data is None:
                    try:
                        snapshot = fs.read_snapshot(path, max_bytes=MAX_FILE_BYTES)
                    except MossError as err:
                        problems.append(err)
                        continue
                    if snapshot.data is None:
                        continue
                else:
                    snapshot = fs.Snapshot(path, data, fs.digest_of(data), fs.identity_of(info))
                # The stat from before the read still holds after it: these bytes had that mtime.
                still = before is not None and dir_fd is not None and _unchanged(dir_fd, name, before)
                if still and before is not None and key_cache.confirmed(entry, before.st_mtime_ns, snapshot.digest):
                    assert entry is not None
                    key = key_cache.key_of(entry)
                else:
                    try:
                        stored = self._parse(path, snapshot)
                    except MossError as err:
                        problems.append(err)
                        continue
                    key = CapsuleKey.of(stored.capsule, stored.relpath)
                found.append(key)
                # A parse may take the mtime after `still` was asked; a change in between moves
                # the ctime and the mtime from those remembered, so the next `keys` parses again.
                if still and before is not None:
                    learned.append(key_cache.Learned(relpath, before.st_mtime_ns, before.st_ctime_ns, snapshot.digest, key, seen_ns))
        finally:
            for dir_fd in folders.values():
                if dir_fd is not None:
                    os.close(dir_fd)
        cache.save(learned, key_cache.missing(cached, listing.files), now_ns=now_ns)
        return found, problems

    def remember(
        self,
        written: Sequence[tuple[PurePosixPath, bytes, CapsuleKey]],
        gone: Sequence[PurePosixPath] = (),
        *,
        proof: Callable[[PurePosixPath, os.stat_result], bool] | None = None,
    ) -> None:
        """Tell the key cache what a writer just put in these files (and which it removed), so
        the next `keys` checks their bytes rather than parsing them. A file changed since is
        parsed again: its bytes or mtime no longer match. `proof(relpath, lstat)`: whether
        the writer can prove the file still holds its bytes (`FileBatch.written`); such a
        file's ctime is trusted at once with its mtime (`capsule_keys.usable`), rather than
        its bytes read again by the next `keys` because they changed within the racy window."""
        from moss_files.index import capsule_keys as key_cache

        now_ns = time.time_ns()
        learned: list[key_cache.Learned] = []
        folders: dict[str, int | None] = {}
        lstat, digest_of, add, learn = os.lstat, fs.digest_of, learned.append, key_cache.Learned
        try:
            for relpath, data, key in written:
                posix = relpath.as_posix()
                folder, _, name = posix.rpartition("/")
                if folder not in folders:
                    try:
                        folders[folder] = fs.open_folder(self.base / folder)
                    except (OSError, MossError):
                        folders[folder] = None
                dir_fd = folders[folder]
                try:
                    st = lstat(name, dir_fd=dir_fd) if dir_fd is not None else lstat(self.path_of(relpath))
                except OSError:
                    continue
                proven = proof is not None and proof(relpath, st)
                add(learn(posix, st.st_mtime_ns, st.st_ctime_ns, digest_of(data), key, None, proven))
        finally:
            for dir_fd in folders.values():
                if dir_fd is not None:
                    os.close(dir_fd)
        key_cache.KeyCache(self.root).save(learned, [relpath.as_posix() for relpath in gone], now_ns=now_ns)

    def find_by_name(self, workspace_norm: str, name_norm: str, *, include_deleted: bool = False) -> StoredCapsule | None:
        """The live capsule holding a name; with `include_deleted`, else the newest deleted one."""
        slot = self.read_slot(workspace_norm, name_norm)
        if slot is not None and not slot.capsule.deleted:
            return slot
        if not include_deleted:
            return None
        scan = self.scan(workspace_norm, include_deleted=True)
        matches = [s for s in scan.capsules if s.capsule.name_norm == name_norm and s.capsule.deleted]
        if not matches:
            raise_first(scan.problems)
            return None
        return max(matches, key=lambda s: (s.capsule.deleted_ms or 0, s.capsule.updated_ms, s.capsule.id))

    def find(self, where: core.Address, *, include_deleted: bool = False) -> StoredCapsule:
        """The capsule at an address (see `find_by_id`, `find_by_name`). Raises NotFound."""
        if where.id is not None:
            found = self.find_by_id(where.id, include_deleted=include_deleted)
        else:
            assert where.name_norm is not None
            found = self.find_by_name(where.workspace_norm, where.name_norm, include_deleted=include_deleted)
        if found is None:
            details = {"id": where.id} if where.id else {"workspace": where.workspace_norm, "name": where.name_norm}
            raise NotFound(f"capsule {where.shown()} not found", details=details)
        return found

    def find_by_id(self, capsule_id: str, *, include_deleted: bool = False) -> StoredCapsule | None:
        """The capsule with this id, wherever it lives.

        Raises the first unreadable file's error when the id was not found among readable files
        (that file may be the capsule), and Conflict AMBIGUOUS_ADDRESSING when two files claim it.
        """
        if not core.is_capsule_id(capsule_id):
            return None
        needle = capsule_id.encode("ascii")
        paths, _strays = self.files(None, include_deleted=include_deleted)
        hits: list[StoredCapsule] = []
        problems: list[MossError] = []
        for path in paths:
            try:
                snapshot = fs.read_snapshot(path, max_bytes=MAX_FILE_BYTES)
            except MossError as err:
                problems.append(err)
                continue
            if snapshot.data is None:
                continue
            # Cheap filter: the id appears in the file or its name, or the file has no id line
            # (then its id is derived from its path and must be computed).
            if needle not in snapshot.data and capsule_id not in path.name and _ID_LINE.search(snapshot.data):
                continue
            try:
                stored = self._parse(path, snapshot)
            except MossError as err:
                problems.append(err)
                continue
            if stored.capsule.id == capsule_id and (include_deleted or not stored.capsule.deleted):
                hits.append(stored)
        if len(hits) > 1:
            raise Conflict(
                f"{len(hits)} files claim capsule id {capsule_id}",
                code="AMBIGUOUS_ADDRESSING",
                status=400,
                details={"paths": [self.display(hit.path) for hit in hits]},
                hint="give each file its own id (or remove the id line from copies)",
            )
        if not hits:
            raise_first(problems)
            return None
        return hits[0]

    # ----------------------------------------------------------------- writing (hold `writing()`)

    def create(self, capsule: Capsule, *, text: str | None = None) -> StoredCapsule:
        """Write a new capsule file where it belongs; never replaces a file.

        Raises Conflict NAME_ALREADY_EXISTS when its slot (or id file) is taken.
        """
        relpath = core.capsule_relpath(capsule)
        path = self.path_of(relpath)
        data = document.encode(text if text is not None else core.render_capsule(capsule))
        if not fs.create_exclusive(path, data):
            code = "NAME_ALREADY_EXISTS" if capsule.name_norm and not capsule.deleted else "ALREADY_EXISTS"
            raise Conflict(
                f"{self.display(path)} exists already",
                code=code,
                path=self.display(path),
                details={"workspace": capsule.workspace, "name": capsule.name, "id": capsule.id},
            )
        return StoredCapsule(capsule, path, relpath, fs.Snapshot(path, data, fs.digest_of(data)))

    def rewrite(self, stored: StoredCapsule, change: Callable[[Capsule], Capsule | None]) -> StoredCapsule:
        """Apply `change` to the capsule in its file, in place, under the file's lock.

        `change` receives the capsule as it is on disk at write time (so a hand edit made after
        the caller's read is the input, and survives), and returns the new capsule or None to
        leave the file alone. Only the frontmatter lines of changed fields differ afterwards.

        Raises NotFound when the file went away, InvalidDocument when it no longer parses,
        Conflict STALE_WRITE when it keeps changing.
        """
        path = stored.path
        relpath = stored.relpath
        shown = self.display(path)

        def transform(doc: document.Document) -> str | None:
            current = core.parse_capsule(doc, relpath, mtime_ms=_mtime_ms(path), path=shown)
            updated = change(current)
            if updated is None:
                return None
            return core.edit_capsule(doc.text, updated, shown)

        try:
            fs.modify_document(path, transform, max_bytes=MAX_FILE_BYTES)
        except NotFound:
            raise NotFound(f"capsule file {shown} went away", path=shown) from None
        result = self.read(path)
        if result is None:
            raise NotFound(f"capsule file {shown} went away", path=shown)
        where = (CAPSULES_DIR / relpath).as_posix()
        if core.escaped_place(where) != where:
            result = self.relocate(result)  # named before the Windows escape: the upgrade's move
        return result

    def relocate(self, stored: StoredCapsule) -> StoredCapsule:
        """Move a capsule's file to where its (changed) metadata says it belongs.

        The move is a rename, so git sees the history continue. Raises Conflict when the target
        exists.
        """
        target_rel = core.capsule_relpath(stored.capsule)
        if target_rel == stored.relpath:
            return stored
        target = self.path_of(target_rel)
        with fs.locked(stored.path):
            if not fs.move_exclusive(stored.path, target):
                raise Conflict(f"cannot move {self.display(stored.path)}: {self.display(target)} exists", code="ALREADY_EXISTS", path=self.display(target))
        moved = self.read(target)
        assert moved is not None
        return moved

    def replace_file(self, stored: StoredCapsule, capsule: Capsule) -> StoredCapsule:
        """Write `capsule` over `stored` (keeping hand-written keys), moving it if its place changed.

        Raises Conflict STALE_WRITE when the file changed since `stored` was read.
        """
        assert stored.snapshot.data is not None
        old_text, bom = document.decode(stored.snapshot.data, self.display(stored.path), max_bytes=MAX_FILE_BYTES)
        text = core.edit_capsule(old_text, capsule, self.display(stored.path))
        target_rel = core.capsule_relpath(capsule)
        if target_rel == stored.relpath:
            with fs.locked(stored.path):
                fs.write_if_unchanged(stored.snapshot, document.encode(text, bom))
            result = self.read(stored.path)
            assert result is not None
            return result
        created = self.create(capsule, text=text)
        self.remove(stored)
        return created

    def remove(self, stored: StoredCapsule) -> None:
        """Delete a capsule's file for good, unless it changed since it was read (STALE_WRITE)."""
        with fs.locked(stored.path):
            current = fs.read_snapshot(stored.path)
            if current.digest != stored.snapshot.digest:
                raise Conflict(
                    "file changed since it was read; not removed",
                    code="STALE_WRITE",
                    path=self.display(stored.path),
                )
            fs.remove(stored.path)


class FolderPart(NamedTuple):
    """One capsule folder as `CapsuleStore.listing` reads it: its capsule files, whether it
    holds a stray entry, and the folders below it that the listing enters (the workspaces of
    the capsules folder; `deleted` of a workspace)."""

    files: int
    strays: bool
    folders: tuple[str, ...]


class FolderCensus:
    """Each capsule folder's `FolderPart`, kept in `.moss/cache/capsule-folders.json` with the
    folder's identity and ctime (device, inode, ctime_ns) and used again while they are the
    same. A folder's ctime moves with every entry created, removed or renamed in it (by any
    program, git included) and no user can set it, so an unchanged ctime means the same
    entries; one within `RACY_SECONDS` of now might change again within the same clock tick,
    so such a folder is listed each time and not kept. The cache is derived and per machine:
    it is written only where `.moss/cache/` exists, and a missing, unreadable or foreign one
    is read as empty."""

    NAME = "capsule-folders.json"
    VERSION = 1
    RACY_SECONDS = 2.0

    def __init__(self, store: CapsuleStore) -> None:
        self.store = store
        self.path = store.root / ".moss" / "cache" / self.NAME
        self.kept: dict[str, list[object]] = self._load()
        self.changed = False
        self.now_ns = 0

    def _load(self) -> dict[str, list[object]]:
        import json

        try:
            data = json.loads(fs.read_bytes(self.path, max_bytes=1 << 24))
        except (OSError, MossError, ValueError):
            return {}
        folders = data.get("folders") if isinstance(data, dict) and data.get("version") == self.VERSION else None
        return folders if isinstance(folders, dict) else {}

    def folder(self, relpath: str) -> FolderPart:
        """The part of the folder `relpath` (relative to the capsules folder; "" for itself)."""
        import time

        path = f"{self.store.base}/{relpath}" if relpath else str(self.store.base)
        try:
            info = os.lstat(path)
        except OSError:
            info = None
        key = [info.st_dev, info.st_ino, info.st_ctime_ns] if info is not None and stat.S_ISDIR(info.st_mode) else None
        kept = self.kept.get(relpath)
        if key is not None and isinstance(kept, list) and len(kept) == 6 and kept[:3] == key:
            files, strays, folders = kept[3:]
            if isinstance(files, int) and isinstance(strays, bool) and isinstance(folders, list):
                return FolderPart(files, strays, tuple(str(name) for name in folders))
        part = _read_part(path, relpath)
        self.now_ns = self.now_ns or time.time_ns()
        if key is not None and key[2] < self.now_ns - int(self.RACY_SECONDS * 1e9):
            self.kept[relpath] = [*key, part.files, part.strays, list(part.folders)]
            self.changed = True
        return part

    def save(self) -> None:
        """Write the parts read anew, when the cache folder exists; a cache that cannot be
        written is left as it is (the next call lists those folders again)."""
        if not self.changed or not self.path.parent.is_dir():
            return
        import json

        data = json.dumps({"version": self.VERSION, "folders": self.kept}, separators=(",", ":")).encode()
        try:
            fs.check_confined(self.path.parent)
            fs.write_atomic(self.path, data)
        except (OSError, MossError):
            pass
        self.changed = False


def _read_part(path: str, relpath: str) -> FolderPart:
    """A folder's part as `CapsuleStore.listing` reads it (see FolderPart)."""
    files = 0
    strays = False
    folders: list[str] = []
    depth = relpath.count("/") + 1 if relpath else 0  # 0 the capsules folder, 1 a workspace, 2 its deleted/
    for entry in _entries(path):
        name = entry.name
        if depth == 0:
            if entry.is_dir(follow_symlinks=False):
                if not fs.is_temporary(Path(name)):
                    folders.append(name)
            elif not _ignored(name):
                strays = True
        elif name.endswith(core.SUFFIX) and not name.startswith(".") and entry.is_file(follow_symlinks=False):
            files += 1
        elif _ignored(name):
            continue
        elif depth == 1 and name == core.DELETED_DIR and entry.is_dir(follow_symlinks=False):
            folders.append(name)
        else:
            strays = True
    return FolderPart(files, strays, tuple(sorted(folders)))


def raise_first(problems: tuple[MossError, ...] | list[MossError]) -> None:
    """Raise the first problem, if any: a lookup that missed must not hide an unreadable file."""
    if problems:
        raise problems[0]


def _entries(folder: str) -> list[os.DirEntry[str]]:
    try:
        return fs.list_entries(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _sorted_entries(folder: str) -> list[os.DirEntry[str]]:
    # By name: the order of sorted paths of one folder, so answers keep their order.
    return sorted(_entries(folder), key=_entry_name)


def _entry_name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _ignored(name: str) -> bool:
    # Our own lock and temp files (all dot-names), and dot-files such as .gitkeep or an
    # editor's swap file.
    return name.startswith(".")


def _is_capsule_entry(entry: os.DirEntry[str]) -> bool:
    # A link is never a capsule file, even to one: its bytes are not the workspace's.
    return entry.name.endswith(core.SUFFIX) and entry.is_file(follow_symlinks=False)


def _stray(store: CapsuleStore, path: Path) -> MossError:
    try:
        mode = path.lstat().st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return fs.symlink_refused(store.display(path))
    if stat.S_ISDIR(mode):
        reason = "is a folder where a capsule file was expected"
    elif mode and not stat.S_ISREG(mode):
        return fs.not_regular(store.display(path), mode)  # a FIFO, socket or device: never opened
    else:
        reason = "is not a capsule file (capsule files end in .md)"
    return InvalidDocument(f"{store.display(path)} {reason}", code="SCHEMA_ERROR", path=store.display(path))


def _unchanged(dir_fd: int, name: str, before: os.stat_result) -> bool:
    """Whether the file `name` in the folder `dir_fd` has the mtime and ctime it had in `before`."""
    try:
        now = os.lstat(name, dir_fd=dir_fd)
    except OSError:
        return False
    return (now.st_mtime_ns, now.st_ctime_ns, now.st_ino) == (before.st_mtime_ns, before.st_ctime_ns, before.st_ino)


def _mtime_ms(path: Path) -> int:
    try:
        return int(path.stat().st_mtime_ns // 1_000_000)
    except FileNotFoundError:
        return 0
